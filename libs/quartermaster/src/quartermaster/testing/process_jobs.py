"""What the process runtime's agents of one stack left running: their jobs' process groups.

A node agent leaves its jobs running when it stops (a restarted agent adopts them from
their attempt records), so a test's stack of the process runtime leaves each unfinished
job (a `sleep 600` of the seed scenario) running after the test, for as long as the job
lasts. A test's end stops them: every live wrapper whose exit file lies under the
stack's folder, with its process group (the job and its children).
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from qm_node_agent.wrapper import ARGV0, SHELL


def wrappers_under(folder: Path) -> list[int]:
    """The pids of live job wrappers (`SHELL -c SCRIPT ARGV0 EXIT_FILE ...`) whose exit
    file lies under `folder`."""
    root = os.path.abspath(folder)
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if len(argv) < 5 or argv[0] != SHELL.encode() or argv[3] != ARGV0.encode():
            continue
        exit_file = os.fsdecode(argv[4])
        if os.path.isabs(exit_file) and os.path.commonpath([exit_file, root]) == root:
            found.append(int(proc.name))
    return found


def stop_process_jobs(folder: Path) -> int:
    """SIGKILL the process group of every job wrapper under `folder`; how many there were."""
    wrappers = wrappers_under(folder)
    for pid in wrappers:
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    return len(wrappers)
