"""Errors of the embedded servers: one base, split into transient and permanent."""

from __future__ import annotations


class EmbeddedServerError(Exception):
    """Base error of `quartermaster.embedded`."""


class TransientEmbeddedServerError(EmbeddedServerError):
    """The server did not come up in time or died; trying again may work."""


class PermanentEmbeddedServerError(EmbeddedServerError):
    """Starting cannot work here (missing binary, unusable data dir); retrying will not help."""


class ServerBinaryNotFoundError(PermanentEmbeddedServerError):
    """The server executable (or the Python package that ships it) is not installed."""
