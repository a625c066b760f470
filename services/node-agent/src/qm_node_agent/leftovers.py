"""What process-runtime agents left running under a folder: their jobs' process groups.

An agent leaves its jobs running when it stops (a restarted agent adopts them from
their attempt records). Where no agent will come back for them (a test's stack at the
test's end, whose unfinished jobs would otherwise run on, a `sleep 600` for 10
minutes), `stop_process_jobs` stops every wrapper whose exit file lies under the
agents' folder, with its process group (the job and its children). The docker
runtime's counterpart is `quartermaster.testing.container_parts.remove_job_resources`.
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
    found = wrappers_under(folder)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    return len(found)
