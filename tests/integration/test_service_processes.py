"""The scheduler and warm-pool services run as processes and stop cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from quartermaster.embedded.nats_server import EmbeddedNats


@pytest.mark.parametrize(
    "module,prefix", [("qm_scheduler", "QM_SCHEDULER"), ("qm_warmpool", "QM_WARMPOOL")]
)
def test_service_process_starts_and_stops_on_sigterm(
    nats_server: EmbeddedNats, module: str, prefix: str
) -> None:
    env = {
        f"{prefix}_NATS_URL": nats_server.url,
        f"{prefix}_STREAM": f"P{module}",
        f"{prefix}_SUBJECT_PREFIX": f"p{module}",
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", module], env=env, stderr=subprocess.PIPE, text=True
    )
    time.sleep(2.0)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
