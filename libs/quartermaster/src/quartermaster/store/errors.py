"""Errors of the Postgres read model: one base, split into transient and permanent."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error the store raises."""


class TransientStoreError(StoreError):
    """Retrying later may succeed (connection lost, serialization failure, timeout)."""


class PermanentStoreError(StoreError):
    """Retrying the same call cannot succeed."""


class InvalidNextTokenError(PermanentStoreError):
    """A `next_token` that this listing did not hand out."""


class InvalidFilterError(PermanentStoreError):
    """A list filter with a value the read model does not know (e.g. a status name)."""


class InvalidSchemaNameError(PermanentStoreError):
    """A schema name that is not a plain lowercase identifier."""


class ProjectionAheadOfLogError(PermanentStoreError):
    """The stored position is past the end of the log: the projection belongs to another log."""


class PositionTimeoutError(TransientStoreError, TimeoutError):
    """The projection did not reach the awaited log position in time."""


_TRANSIENT_SQLSTATE_CLASSES = ("08", "40", "53", "57")  # connection, rollback, resources, shutdown


def store_error(err: BaseException, doing: str) -> StoreError:
    """Translate a driver or socket error into a transient or permanent store error.

    Transient: the socket failed, the connection is gone, or Postgres says retry
    (SQLSTATE classes 08, 40, 53, 57). Anything else is a bug or bad data: permanent.
    """
    message = f"{doing}: {type(err).__name__}: {err}"
    sqlstate = getattr(err, "sqlstate", None)
    if isinstance(err, OSError | TimeoutError):
        return TransientStoreError(message)
    if isinstance(sqlstate, str) and sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES:
        return TransientStoreError(message)
    if sqlstate is None and "connection" in str(err).lower():
        return TransientStoreError(message)  # asyncpg: "connection was closed ..."
    return PermanentStoreError(message)
