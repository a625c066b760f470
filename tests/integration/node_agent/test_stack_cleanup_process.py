"""`qm_node_agent.leftovers`: the stop of what a stack's process-runtime agents left running."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from node_agent_harness import process_alive

from qm_node_agent.leftovers import stop_process_jobs, wrappers_under
from qm_node_agent.wrapper import wrapper_argv


def leave(folder: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A job left running as an agent leaves it: its wrapper in a session of its own, and
    a child of the job (whose pid the job writes to `child`)."""
    folder.mkdir(parents=True)
    child = folder / "child"
    job = ["sh", "-c", f'sleep 600 & echo $! > "{child}"; wait']
    wrapper = subprocess.Popen(
        wrapper_argv(str(folder / "job.exit"), job, str(folder / "job.log")),
        cwd=folder,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not child.exists() or not child.read_text().strip():
        assert time.monotonic() < deadline, "the job did not start"
        time.sleep(0.01)
    return wrapper, child


def until_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while process_alive(pid):
        assert time.monotonic() < deadline, f"pid {pid} outlived the stop"
        time.sleep(0.01)


def test_a_stacks_end_stops_its_jobs_with_their_children_and_no_others(tmp_path: Path) -> None:
    mine, mine_child = leave(tmp_path / "stack1" / "nodes" / "node-1" / "jobs")
    other, other_child = leave(tmp_path / "stack10" / "nodes" / "node-1" / "jobs")  # name alike
    try:
        assert wrappers_under(tmp_path / "stack1") == [mine.pid]

        assert stop_process_jobs(tmp_path / "stack1") == 1

        assert mine.wait(timeout=10) == -9
        until_gone(int(mine_child.read_text()))  # the job's child too
        assert other.poll() is None and process_alive(int(other_child.read_text()))
        assert stop_process_jobs(tmp_path / "stack1") == 0
    finally:
        stop_process_jobs(tmp_path / "stack10")
        other.wait(timeout=10)
    until_gone(int(other_child.read_text()))
