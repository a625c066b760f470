"""What can go wrong with an object: the caller's fault, or the store's."""

from __future__ import annotations


class ObjectStoreError(Exception):
    """A request to the store failed."""


class StoreClientError(ObjectStoreError):
    """The request itself cannot succeed (no such bucket or key, access denied, bad
    credentials): retrying changes nothing. A job's client error."""


class StoreUnavailable(ObjectStoreError):
    """The store did not answer, or answered with a server fault: an infrastructure
    fault, worth retrying later."""
