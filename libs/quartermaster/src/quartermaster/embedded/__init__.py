"""Real servers as child processes for tests and `qm up`: nats-server and Postgres."""

from quartermaster.embedded.errors import (
    EmbeddedServerError,
    PermanentEmbeddedServerError,
    ServerBinaryNotFoundError,
    TransientEmbeddedServerError,
)
from quartermaster.embedded.nats_server import EmbeddedNats, find_nats_server
from quartermaster.embedded.postgres import EmbeddedPostgres

__all__ = [
    "EmbeddedNats",
    "EmbeddedPostgres",
    "EmbeddedServerError",
    "PermanentEmbeddedServerError",
    "ServerBinaryNotFoundError",
    "TransientEmbeddedServerError",
    "find_nats_server",
]
