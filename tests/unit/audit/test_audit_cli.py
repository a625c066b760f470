"""The auditor's commands on files: exit statuses and what a person reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from logs import SEED, decision_messages, edited, seed_log

from quartermaster.audit import write_log
from quartermaster.cli.main import main

UNIT = "ml.g5.xlarge"


def qm(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_verify_a_good_log_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = qm(capsys, "audit", "verify", "--from-file", str(SEED))
    assert status == 0
    assert "OK: every recorded decision is what the pass gives" in out


def test_verify_a_forged_log_exits_1_and_shows_both_sides(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = seed_log()
    index = decision_messages(log)[0]
    path = tmp_path / "forged.jsonl"
    write_log(path, edited(log, index, 1, hosts=("h3",)))
    status, out, _ = qm(capsys, "audit", "verify", "--from-file", str(path))
    assert status == 1
    assert f"the first at seq {log[index].seq}" in out
    assert '"hosts":["h3"]' in out and '"hosts":["h2"]' in out


def test_explain_from_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = qm(capsys, "explain", "med", "--from-file", str(SEED))
    assert status == 0
    assert "rule RECLAIM" in out and "preemption requested to make room for qs2_job_1" in out
    assert "* med" in out and "priority 3 is above med's 2" in out


def test_explain_an_unknown_job_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = qm(capsys, "explain", "nobody", "--from-file", str(SEED))
    assert status == 2 and "job 'nobody' is not in the log" in err


def test_audit_state_at_a_sequence(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = qm(capsys, "audit", "state", "--from-file", str(SEED), "--at", "10")
    assert status == 0
    assert "state after seq 10" in out
    qs1 = next(line for line in out.splitlines() if line.startswith("q      QS1"))
    assert qs1.split()[4:8] == ["2", "1", "1", "1"]  # in use, limit, borrowed, stopping
    assert "qs2_job_1" in out  # QS2's head, waiting for med's stop


@pytest.mark.parametrize("instant", ["@1000.0", "1970-01-01T00:16:40"])
def test_audit_state_at_a_time(capsys: pytest.CaptureFixture[str], instant: str) -> None:
    """At 1000.0 s the hosts had registered; the shares and jobs came in the next message."""
    status, out, _ = qm(capsys, "audit", "state", "--from-file", str(SEED), "--at", instant)
    assert status == 0
    assert "state after seq 4 " in out and "(no RUNNABLE job)" in out


def test_audit_state_rejects_a_bad_instant(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = qm(capsys, "audit", "state", "--from-file", str(SEED), "--at", "soon")
    assert status == 2 and "--at" in err


def test_simulate_a_trace_writes_the_picture(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "candidate.json"
    config.write_text(
        json.dumps(
            {
                "capacity": {UNIT: 2},
                "shares": [
                    {"name": "QS1", "limits": {UNIT: 1}, "strategy": "LEND_AND_BORROW"},
                    {"name": "QS2", "limits": {UNIT: 1}, "strategy": "LEND"},
                ],
            }
        )
    )
    trace = tmp_path / "trace.jsonl"
    rows = [(0, "QS1"), (0, "QS1"), (18000, "QS2")]
    trace.write_text(
        "".join(json.dumps({"arrival": a, "duration": 36000, "share": s}) + "\n" for a, s in rows)
    )
    svg = tmp_path / "timeline.svg"
    status, out, _ = qm(
        capsys, "simulate", "--trace", str(trace), "--config", str(config), "--svg", str(svg)
    )
    assert status == 0
    assert svg.read_text().startswith("<svg")
    candidate = next(line for line in out.splitlines() if line.startswith("candidate "))
    assert "87.5%" in candidate
    qs1 = next(line for line in out.splitlines() if line.startswith("QS1"))
    assert qs1.split()[1:5] == ["candidate", "2", "2", "125.0%"]


def test_simulate_a_recorded_log_with_its_own_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = qm(capsys, "simulate", "--log", str(SEED))
    assert status == 0
    assert "recorded queue q: 4 jobs that ran" in out and "reserve-only" in out


def test_simulate_a_trace_without_config_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    status, _, err = qm(capsys, "simulate", "--trace", str(trace))
    assert status == 2 and "--config" in err


# A client-only install: no nats-py and no quartermaster-stack (its `qm up` entry point).
CLIENT_ONLY = """
import importlib.metadata as metadata, sys
sys.modules["nats"] = None
every = metadata.entry_points
metadata.entry_points = lambda **kw: [] if kw.get("group") == "quartermaster.cli" else every(**kw)
from quartermaster.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_the_bus_extra_offline_work_runs_and_the_stream_says_what_to_install(
    tmp_path: Path,
) -> None:
    """nats-py is missing (simulated: its import is blocked)."""
    offline = subprocess.run(
        [sys.executable, "-c", CLIENT_ONLY, "audit", "verify", "--from-file", str(SEED)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert offline.returncode == 0, offline.stderr
    live = subprocess.run(
        [sys.executable, "-c", CLIENT_ONLY, "log", "export", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert live.returncode == 2
    assert "needs the bus extra: pip install 'quartermaster[bus]'" in live.stderr
