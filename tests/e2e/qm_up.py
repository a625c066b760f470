"""`qm up` as a user starts it: a child process on embedded NATS and Postgres, on a free
port, with its own data dir; the environment a shell in the repository would have."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client import Quartermaster

VENV_BIN = Path(sys.executable).parent
START_TIMEOUT_SECONDS = 120.0
STOP_TIMEOUT_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RunningStack:
    address: str
    data_dir: Path
    env: dict[str, str]
    output: list[str] = field(default_factory=list)


def terminate_every_job(stack: RunningStack) -> None:
    """Job processes outlive `qm up`: end every job still going, whatever the test did."""
    credentials = stack.data_dir / "credentials"
    client = Quartermaster(stack.address, timeout=20, credentials_dir=credentials)
    with client:
        for queue in client.describe_job_queues():
            for job in client.list_jobs(queue.job_queue_name):
                if job.status not in (pb.JOB_STATUS_SUCCEEDED, pb.JOB_STATUS_FAILED):
                    client.call(
                        client.jobs.TerminateServiceJob,
                        pb.TerminateServiceJobRequest(job_id=job.job_id, reason="test over"),
                    )
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while time.monotonic() < deadline and any(
            job.status not in (pb.JOB_STATUS_SUCCEEDED, pb.JOB_STATUS_FAILED)
            for queue in client.describe_job_queues()
            for job in client.list_jobs(queue.job_queue_name)
        ):
            time.sleep(0.2)


@contextlib.contextmanager
def qm_up(data_dir: Path, *flags: str, cwd: Path | None = None) -> Iterator[RunningStack]:
    """Run `qm up` (in `cwd`) until the block ends (then Ctrl-C, as a user stops it)."""
    port = free_port()
    env = {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', os.defpath)}",  # an active venv
        "QM_ADDRESS": f"127.0.0.1:{port}",
        "QM_CREDENTIALS_DIR": str(data_dir / "credentials"),
        "PYTHONUNBUFFERED": "1",
    }
    argv = [str(VENV_BIN / "qm"), "up", "--data-dir", str(data_dir), "--grpc-port", str(port)]
    argv += ["--metrics-port", "0", "--aws-port", "0", *flags]
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    stack = RunningStack(f"127.0.0.1:{port}", data_dir, env)
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            stack.output.append(line)
            if line.startswith("try: qm"):
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not ready.wait(0.2):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("qm up did not start:\n" + "".join(stack.output))
        yield stack
    finally:
        if ready.is_set():
            terminate_every_job(stack)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(5)
