"""The process runtime's wrapper: it records how the job ended, even after a signal.

It must cost little per job: it runs no Python interpreter, and its module
imports the standard library only.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qm_node_agent import wrapper
from qm_node_agent.launch import ML_DIR
from qm_node_agent.runtime.process import namespace_problem
from qm_node_agent.wrapper import bind_mounts, wrapper_argv


def wrap(exit_file: Path, *command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        wrapper_argv(str(exit_file), command),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_the_exit_code_is_written_and_returned(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit"
    proc = wrap(exit_file, "sh", "-c", "exit 7")

    assert proc.wait(10) == 7
    assert json.loads(exit_file.read_text()) == {"exit_code": 7, "start_error": None}


def test_a_command_that_does_not_exist_is_a_start_error(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit"
    proc = wrap(exit_file, "no-such-program-here")

    assert proc.wait(10) == 127
    status = json.loads(exit_file.read_text())
    assert status["exit_code"] == 127
    assert status["start_error"].startswith("command not found: no-such-program-here")


def test_sigterm_to_the_group_reaches_the_job_and_the_wrapper_records_it(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit"
    ready = tmp_path / "ready"
    proc = wrap(
        exit_file, "sh", "-c", f"trap 'exit 143' TERM; touch {ready}; while :; do sleep 0.05; done"
    )
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)

    os.killpg(proc.pid, signal.SIGTERM)

    assert proc.wait(10) == 143
    assert json.loads(exit_file.read_text())["exit_code"] == 143


def test_a_job_killed_by_a_signal_exits_128_plus_the_signal(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit"
    proc = wrap(exit_file, "sh", "-c", "kill -KILL $$")

    assert proc.wait(10) == 128 + signal.SIGKILL
    assert json.loads(exit_file.read_text())["exit_code"] == 137


def test_a_command_that_cannot_be_run_is_a_start_error(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit"
    script = tmp_path / "not-executable"
    script.write_text("echo hi\n")
    proc = wrap(exit_file, str(script))

    assert proc.wait(10) == 126
    status = json.loads(exit_file.read_text())
    assert status["start_error"] == f"command cannot be run: {script}"


def test_a_job_exiting_127_itself_is_not_a_start_error(tmp_path: Path) -> None:
    exit_file = tmp_path / "exit"
    proc = wrap(exit_file, "sh", "-c", "exit 127")

    assert proc.wait(10) == 127
    assert json.loads(exit_file.read_text()) == {"exit_code": 127, "start_error": None}


def test_the_wrapper_is_not_a_python_interpreter(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = wrap(tmp_path / "exit", "sh", "-c", f"touch {ready}; sleep 5")
    try:
        deadline = time.monotonic() + 10
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        exe = os.path.realpath(f"/proc/{proc.pid}/exe")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert exe == os.path.realpath(wrapper.SHELL)
    assert exe != os.path.realpath(sys.executable)


def test_the_wrapper_module_imports_the_standard_library_only() -> None:
    tree = ast.parse(Path(wrapper.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - sys.stdlib_module_names - {"__future__"} == set()


def test_the_wrapper_appends_the_job_output_to_its_log(tmp_path: Path) -> None:
    exit_file, log = tmp_path / "exit", tmp_path / "job.log"
    log.write_text("earlier\n")
    proc = subprocess.Popen(
        wrapper_argv(str(exit_file), ["sh", "-c", "echo out; echo err >&2"], str(log)),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    captured, _ = proc.communicate(timeout=10)

    assert proc.returncode == 0
    assert log.read_text() == "earlier\nout\nerr\n"
    assert captured == b""  # nothing went to the output the wrapper was given
    assert json.loads(exit_file.read_text()) == {"exit_code": 0, "start_error": None}


def test_a_log_the_wrapper_cannot_open_is_an_infrastructure_error_and_runs_nothing(
    tmp_path: Path,
) -> None:
    exit_file, log, ran = tmp_path / "exit", tmp_path / "job.log", tmp_path / "ran"
    log.mkdir()  # a folder in the way
    proc = subprocess.Popen(
        wrapper_argv(str(exit_file), ["touch", str(ran)], str(log)), start_new_session=True
    )

    assert proc.wait(10) == 1
    status = json.loads(exit_file.read_text())
    assert status["infrastructure_error"] == wrapper.LOG_ERROR
    assert status["start_error"] is None
    assert not ran.exists()


NAMESPACES = namespace_problem(shutil.which("unshare") or "unshare")
needs_namespaces = pytest.mark.skipif(
    NAMESPACES is not None, reason=f"no mount namespaces here: {NAMESPACES}"
)


def in_own_namespace(exit_file: Path, command: list[str], mounts: Path) -> int:
    argv = ["unshare", "--mount", "--propagation", "private"]
    argv += wrapper_argv(str(exit_file), command, "", str(mounts))
    return subprocess.run(argv, start_new_session=True, timeout=10, check=False).returncode


@needs_namespaces
def test_the_job_sees_its_binds_by_one_mount_even_with_odd_paths(tmp_path: Path) -> None:
    tree, hosts = tmp_path / "a tree\\with odd\tnames", tmp_path / "hosts file"
    tree.mkdir()
    (tree / "marker").write_text("this job's\n")
    hosts.write_text("10.0.0.1 algo-1\n")
    mounts, seen = tmp_path / "mounts.fstab", tmp_path / "seen"
    mounts.write_text(bind_mounts([(str(tree), ML_DIR), (str(hosts), "/etc/hosts")]))
    script = f"cat {ML_DIR}/marker /etc/hosts > {seen}"

    assert in_own_namespace(tmp_path / "exit", ["sh", "-c", script], mounts) == 0
    assert seen.read_text() == "this job's\n10.0.0.1 algo-1\n"
    assert not Path(ML_DIR, "marker").exists()  # the host's own view is untouched
    assert "algo-1" not in Path("/etc/hosts").read_text()


@needs_namespaces
def test_binds_that_cannot_be_made_are_an_infrastructure_error_and_run_nothing(
    tmp_path: Path,
) -> None:
    exit_file, ran, mounts = tmp_path / "exit", tmp_path / "ran", tmp_path / "mounts.fstab"
    mounts.write_text(bind_mounts([(str(tmp_path / "gone"), ML_DIR)]))

    assert in_own_namespace(exit_file, ["touch", str(ran)], mounts) == 1
    status = json.loads(exit_file.read_text())
    assert status["infrastructure_error"] == wrapper.MOUNT_ERROR
    assert not ran.exists()


def test_a_work_dir_the_wrapper_cannot_enter_is_an_infrastructure_error_and_runs_nothing(
    tmp_path: Path,
) -> None:
    exit_file, ran = tmp_path / "exit", tmp_path / "ran"
    argv = wrapper_argv(str(exit_file), ["touch", str(ran)], "", "", str(tmp_path / "gone"))

    assert subprocess.run(argv, start_new_session=True, timeout=10, check=False).returncode == 1
    status = json.loads(exit_file.read_text())
    assert status["infrastructure_error"] == wrapper.WORK_DIR_ERROR
    assert not ran.exists()


def test_the_job_runs_in_the_work_dir_it_is_given(tmp_path: Path) -> None:
    exit_file, seen = tmp_path / "exit", tmp_path / "seen"
    work = tmp_path / "work"
    work.mkdir()
    argv = wrapper_argv(str(exit_file), ["sh", "-c", f"pwd > {seen}"], "", "", str(work))

    assert subprocess.run(argv, start_new_session=True, timeout=10, check=False).returncode == 0
    assert seen.read_text() == f"{work}\n"
