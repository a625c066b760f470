"""docs/examples/quota_management.py, the SDK notebook's flow, runs against `qm up`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from qm_up import qm_up

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"

pytestmark = pytest.mark.e2e


def test_the_quota_management_example_plays_the_seed_scenario(tmp_path: Path) -> None:
    with qm_up(tmp_path / "data", "--nodes", "3") as stack:
        run = subprocess.run(
            [sys.executable, str(EXAMPLES / "quota_management.py")],
            cwd=EXAMPLES,
            env=stack.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log + "".join(stack.output)
    assert "The seed scenario played out" in log
    assert "Job: qs1_job_med is RUNNABLE" in log  # the reclaim
    assert "Job: qs1_job_high is RUNNABLE" in log  # the in-share preemption
    assert "QuotaShare: QS3" in log
