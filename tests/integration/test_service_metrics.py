"""Each service run as a process serves `/metrics` on its `METRICS_PORT` setting."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from quartermaster.embedded.nats_server import EmbeddedNats


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str, proc: subprocess.Popen[str], wanted: list[str], timeout: float = 30.0) -> str:
    """The page once it holds every `wanted` line, or the last one read at the timeout.

    The port answers before the service has folded anything: the state-derived gauges
    (the scheduler's `quartermaster_jobs`) come once its follower holds a state."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                text = str(reply.read().decode())
            if all(line in text for line in wanted) or time.monotonic() > deadline:
                return text
        except (urllib.error.URLError, ConnectionError):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


@pytest.mark.parametrize(
    "module,prefix,expected",
    [
        ("qm_scheduler", "QM_SCHEDULER", ['consumer="scheduler"', "quartermaster_jobs"]),
        ("qm_warmpool", "QM_WARMPOOL", ['consumer="warmpool"']),
        ("qm_node_agent", "QM_NODE", ["# TYPE quartermaster_attempt_start_phase_seconds"]),
    ],
)
def test_service_serves_metrics_on_its_port(
    nats_server: EmbeddedNats, tmp_path: Path, module: str, prefix: str, expected: list[str]
) -> None:
    port = free_port()
    env = {
        f"{prefix}_NATS_URL": nats_server.url,
        f"{prefix}_STREAM": f"M{module}",
        f"{prefix}_SUBJECT_PREFIX": f"m{module}",
        f"{prefix}_METRICS_PORT": str(port),
        "QM_NODE_HOST_ID": "metrics-host",
        "QM_NODE_INSTANCE_TYPE": "ml.g5.xlarge",
        "QM_NODE_DATA_DIR": str(tmp_path / "node"),
        "QM_NODE_GPU_COUNT": "0",
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", module], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        text = scrape(f"http://127.0.0.1:{port}/metrics", proc, expected)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    for line in expected:
        assert line in text
    assert proc.returncode == 0, err
    assert "Traceback" not in err
