"""The whole system on one machine (`qm up`, `qm demo`): embedded NATS and Postgres, every service.

A distribution of its own over the four service packages, so that the shared
library (and a client-only install) never depends on a service.
"""
