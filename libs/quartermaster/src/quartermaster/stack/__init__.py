"""The whole system on one machine (`qm up`): embedded NATS and Postgres, every service.

This is a composition root over the service packages; it needs them installed
(`scripts/bootstrap.sh` does that).
"""
