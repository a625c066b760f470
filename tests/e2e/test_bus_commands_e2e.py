"""The commands that read the bus find `qm up` from its data dir, and never hang.

Beside a running (secured) `qm up`, `qm log export`, `qm audit verify|state`, `qm usage`,
`qm top` and `qm explain` run with no `QM_*` variable at all: the data dir's
`stack.json` names the NATS URL, the read-only auditor user (its password file, CA
and client certificate) and admission's address. With nothing listening, each bus
command ends with one line naming the URL and user it tried, and exit status 1.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from qm_up import VENV_BIN, free_port, qm_up

from quartermaster.cli.bus import AuditorAccess, StackFile, write_stack_file

QM = str(VENV_BIN / "qm")
COMMAND_TIMEOUT_S = 30  # far above the 10 s a command may take when nothing answers
BUS_COMMANDS = {
    "log export": ["log", "export", "--out", "log.jsonl"],
    "audit verify": ["audit", "verify"],
    "audit state": ["audit", "state", "--at", "1"],
    "usage": ["usage", "--format", "csv"],
}


def bare_env() -> dict[str, str]:
    """A shell's environment with none of qm's settings: only the data dir can tell."""
    return {k: v for k, v in os.environ.items() if not k.startswith("QM_")}


def qm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [QM, *args],
        cwd=cwd,
        env=bare_env(),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


@pytest.fixture(scope="module")
def beside_qm_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory in which `qm up` runs on the default data dir (./.qm-data)."""
    here = tmp_path_factory.mktemp("operator")
    with qm_up(here / ".qm-data", "--nodes", "1", cwd=here):
        yield here


def test_bus_commands_find_qm_up_in_the_default_data_dir(beside_qm_up: Path) -> None:
    here = beside_qm_up
    exported = qm("log", "export", "--out", "log.jsonl", cwd=here)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.startswith("exported ") and (here / "log.jsonl").stat().st_size
    for name in ("audit verify", "audit state", "usage"):
        done = qm(*BUS_COMMANDS[name], cwd=here)
        assert done.returncode == 0, f"{name}: {done.stderr}"


def test_every_command_takes_the_data_dir_from_anywhere(beside_qm_up: Path, tmp_path: Path) -> None:
    data_dir = str(beside_qm_up / ".qm-data")
    verified = qm("audit", "verify", "--data-dir", data_dir, cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert "OK: every recorded decision" in verified.stdout
    top = qm("top", "--once", "--data-dir", data_dir, cwd=tmp_path)  # admission's address too
    assert top.returncode == 0, top.stderr
    explained = qm("explain", "no-such-job", "--data-dir", data_dir, cwd=tmp_path)
    assert explained.returncode == 1
    assert "NOT_FOUND" in explained.stderr, explained.stderr  # admission answered


def test_with_nothing_listening_each_bus_command_ends_with_one_line(tmp_path: Path) -> None:
    """A stack file naming a bus that is gone (qm up stopped): one line, exit 1, no hang."""
    url = f"tls://127.0.0.1:{free_port()}"
    auditor = AuditorAccess(user="auditor", password_file="auditor.password")
    (tmp_path / "auditor.password").write_text("not-a-real-one\n")
    write_stack_file(tmp_path, StackFile(grpc_address="127.0.0.1:1", nats_url=url, auditor=auditor))
    env = bare_env()
    started = time.monotonic()
    running = {
        name: subprocess.Popen(
            [QM, *args, "--data-dir", str(tmp_path)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in BUS_COMMANDS.items()
    }
    took = {}
    for name, process in running.items():
        _, err = process.communicate(timeout=COMMAND_TIMEOUT_S)
        took[name] = time.monotonic() - started
        assert process.returncode == 1, f"{name}: {err}"
        [line] = err.splitlines()
        assert line.startswith("qm: error: no answer from the bus at ")
        assert url in line and "as auditor" in line and "stack.json" in line
    assert not (tmp_path / "log.jsonl").exists()
    print(
        "\nnothing listening, exit 1 after: " + ", ".join(f"{k} {v:.1f}s" for k, v in took.items())
    )
