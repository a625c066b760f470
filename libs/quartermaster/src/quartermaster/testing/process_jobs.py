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

from qm_node_agent.runtime.process import wrappers


def wrappers_under(folder: Path) -> list[int]:
    """The pids of job wrappers whose exit file lies under `folder`."""
    root = os.path.abspath(folder)
    return [
        pid
        for pid, exit_file in wrappers()
        if os.path.isabs(exit_file) and os.path.commonpath([exit_file, root]) == root
    ]


def stop_process_jobs(folder: Path) -> int:
    """SIGKILL the process group of every job wrapper under `folder`; how many there were."""
    wrappers = wrappers_under(folder)
    for pid in wrappers:
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    return len(wrappers)
