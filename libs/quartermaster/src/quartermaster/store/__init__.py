"""The Postgres read model: a projector that folds the log into tables, and its queries.

- `schema`: the tables (idempotent DDL) in a schema of the caller's choice
- `documents`: core entities as dicts shaped as their qm.v1 messages
- `projector`: `Projector` folds log messages and commits rows + position atomically
- `queries`: `ReadModel`, the reads the gRPC layer answers from
"""

from quartermaster.store.errors import (
    InvalidFilterError,
    InvalidNextTokenError,
    InvalidSchemaNameError,
    PermanentStoreError,
    PositionTimeoutError,
    ProjectionAheadOfLogError,
    StoreError,
    TransientStoreError,
)
from quartermaster.store.position import PositionWatch
from quartermaster.store.projector import Batch, Projector
from quartermaster.store.queries import ReadModel
from quartermaster.store.schema import create_schema

__all__ = [
    "Batch",
    "InvalidFilterError",
    "InvalidNextTokenError",
    "InvalidSchemaNameError",
    "PermanentStoreError",
    "PositionTimeoutError",
    "PositionWatch",
    "ProjectionAheadOfLogError",
    "Projector",
    "ReadModel",
    "StoreError",
    "TransientStoreError",
    "create_schema",
]
