"""What `qm up` tells its user before it starts and when it stops."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

from qm_node_agent.agent import NodeAgent
from quartermaster.core.model import JobStatus
from quartermaster_stack.stack import Stack

LIVE = (JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING)


def port_taken(port: int, host: str = "127.0.0.1") -> str | None:
    """Why `port` cannot be listened on (None: it can), checked before anything starts.

    SO_REUSEADDR as servers set it: a port left in TIME_WAIT is free, one that a
    server listens on is not.
    """
    if port == 0:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return f"port {port} is in use (another `qm up`?)"
            return f"cannot listen on {host}:{port}: {err.strerror}"
    return None


def live_jobs(stack: Stack) -> list[tuple[str, str, str]]:
    """(name, id, hosts) of every job holding hosts, as a node agent's fold sees it."""
    agents = [p for p in stack.parts.values() if isinstance(p, NodeAgent) and p.ready]
    if not agents:
        return []
    state = agents[0].state
    return sorted(
        (job.job_name, job.job_id, ",".join(job.hosts))
        for job in state.jobs.values()
        if job.status in LIVE
    )


def stop_message(jobs: list[tuple[str, str, str]], runtime: str, data_dir: Path) -> str:
    if not jobs:
        return "Stopping Quartermaster (no job is running)."
    kind = "containers" if runtime == "docker" else "processes"
    lines = [
        f"Stopping Quartermaster. {len(jobs)} job(s) keep running: the node agents stop, "
        f"their job {kind} do not. `qm up --data-dir {data_dir}` re-adopts them "
        "(or `qm job terminate ID` first to stop one):"
    ]
    lines += [f"  {name}  {job_id}  on {hosts}" for name, job_id, hosts in jobs]
    return "\n".join(lines)
