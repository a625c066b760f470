"""`/metrics` of a whole stack, scraped over HTTP while the seed scenario plays."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from conftest import StackFactory, client_for
from prometheus_client.parser import text_string_to_metric_families
from scenario import LONG, QUEUE, play_seed_scenario, shell, until

from quartermaster.client import TrainingQueue

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def test_seed_scenario_metrics(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=3, metrics_port=0)  # 0: a free port
    url = stack.stack.metrics_url
    assert url is not None
    client = client_for(stack)
    play_seed_scenario(client)
    # After the terminations QS1's high and med run again (med on QS2's idle unit);
    # one more QS1 job waits: the only free unit is QS3's, held back (RESERVE).
    running = {"queue": QUEUE, "share": "QS1", "status": "RUNNING"}
    until(
        "high and med run again", lambda: value(scrape(url), "quartermaster_jobs", **running) == 2
    )
    TrainingQueue(QUEUE, client).submit(shell(LONG), job_name="extra", quota_share_name="QS1")
    pending = "quartermaster_pending_jobs"
    held_back = {"queue": QUEUE, "share": "QS1", "reason": "RESERVE_HELD_BACK"}
    until("extra waits", lambda: value(scrape(url), pending, **held_back) == 1)

    found = scrape(url)

    preempted = "quartermaster_preempted_jobs_total"
    victim = {"queue": QUEUE, "share": "QS1"}
    assert value(found, preempted, **victim, preempting_share="QS2", reason="reclaim") == 1
    assert value(found, preempted, **victim, preempting_share="QS1", reason="in_share") == 1
    assert sum(n for (name, _), n in found.items() if name == preempted) == 2
    assert sum(n for (name, _), n in found.items() if name == pending) == 1
    unit = "ml.g5.xlarge"
    usage = "quartermaster_quota_share_resource_usage"
    shares = ("QS1", "QS2", "QS3")
    assert [value(found, usage, queue=QUEUE, share=s, unit=unit) for s in shares] == [2, 0, 0]
    borrowed = "quartermaster_quota_share_borrowed_units"
    assert value(found, borrowed, queue=QUEUE, share="QS1", unit=unit) == 1
    lent = "quartermaster_quota_share_lent_units"
    assert [value(found, lent, queue=QUEUE, share=s, unit=unit) for s in shares] == [0, 1, 0]
    jobs_gauge = "quartermaster_jobs"
    assert value(found, jobs_gauge, queue=QUEUE, share="QS1", status="RUNNING") == 2
    assert value(found, jobs_gauge, queue=QUEUE, share="QS1", status="FAILED") == 1
    assert value(found, jobs_gauge, queue=QUEUE, share="QS2", status="FAILED") == 1
    assert value(found, "quartermaster_hosts", unit=unit, status="HEALTHY") == 3
    # Event-derived figures from every part of the process.
    waits = "quartermaster_admission_wait_time_seconds_count"
    assert value(found, waits, queue=QUEUE, share="QS1") == 3  # high, med, low (first dispatch)
    assert value(found, waits, queue=QUEUE, share="QS2") == 1
    submit = {"method": "/qm.v1.ServiceJobs/SubmitServiceJob", "code": "OK"}
    submits = value(found, "quartermaster_rpc_duration_seconds_count", **submit)
    assert submits is not None and submits >= 5
    starts = [
        n
        for (name, labels), n in found.items()
        if name == "quartermaster_attempt_start_phase_seconds_count"
        and ("phase", "dispatch_to_running") in labels
    ]
    assert sum(starts) >= 6  # high, med, qs2_job_1, low, then high and med again
    lag = "quartermaster_log_consumer_lag_messages"
    assert {dict(labels)["consumer"] for (name, labels) in found if name == lag} >= {
        "scheduler",
        "warmpool",
        "admission",
        "projector",
        "node-1",
    }


def health(url: str, kind: str) -> tuple[int, dict[str, dict[str, object]]]:
    """(status, checks) of `/livez` or `/readyz` beside `/metrics`."""
    try:
        with urllib.request.urlopen(url.replace("/metrics", f"/{kind}"), timeout=10) as reply:
            return reply.status, json.loads(reply.read())["checks"]
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())["checks"]


def test_qm_up_answers_for_every_part_on_livez_and_readyz(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=2, metrics_port=0)
    url = stack.stack.metrics_url
    assert url is not None
    # Readiness converges: each agent's first heartbeat is stored a moment after it starts.
    until("every part is ready", lambda: health(url, "readyz")[0] == 200)
    status, checks = health(url, "readyz")
    assert status == 200, [(name, c) for name, c in checks.items() if not c["ok"]]
    parts = {name.split(".", 1)[0] for name in checks if "." in name}
    assert parts == {"scheduler", "warmpool", "admission", "node-1", "node-2"}, checks
    assert "scheduler.leadership" in checks and "admission.postgres" in checks
    stack.stop_part("scheduler")  # a stack without its scheduler cannot do its work
    status, checks = health(url, "readyz")
    assert status == 503 and checks["scheduler.running"]["ok"] is False, checks
    stack.start_part("scheduler")
    until("the scheduler is back", lambda: health(url, "readyz")[0] == 200)
    assert health(url, "livez")[0] == 200
