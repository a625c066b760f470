"""A `pg_ctl start` killed by a signal is tried again; a server that fails to start is not."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from quartermaster.embedded.postgres import _started


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
    assert _started(get_server, tmp_path) == "server"
    assert len(calls) == 2


def test_a_server_that_fails_to_start_is_not_tried_again(tmp_path: Path) -> None:
    get_server, calls = launcher(1)
    with pytest.raises(subprocess.CalledProcessError):
        _started(get_server, tmp_path)
    assert len(calls) == 1


def test_a_launcher_that_keeps_crashing_gives_up(tmp_path: Path) -> None:
    get_server, calls = launcher(-11, -11, -11)
    with pytest.raises(subprocess.CalledProcessError):
        _started(get_server, tmp_path)
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

    assert _started(get_server, tmp_path) == "server"
    assert len(calls) == 2


def test_a_missing_file_without_a_crashed_launcher_is_not_tried_again(tmp_path: Path) -> None:
    calls: list[int] = []

    def get_server(data_dir: Path, cleanup_mode: str) -> str:
        calls.append(1)
        raise FileNotFoundError("initdb")

    with pytest.raises(FileNotFoundError):
        _started(get_server, tmp_path)
    assert len(calls) == 1
