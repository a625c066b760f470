"""The state-derived gauges and the scheduler's counters over the seed scenario's states."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from quartermaster import events as ev
from quartermaster.core import decide
from quartermaster.metrics import SchedulerMetrics, state_families
from quartermaster.testing.builders import World, a_job

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(families: list[Metric]) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def value(found: Samples, name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def seed_world() -> World:
    w = World().environment(ml_g5_xlarge=3).queue().hosts(3)
    w.share("QS1", 1, "LEND_AND_BORROW", borrow_limit=200, preemption=True)
    w.share("QS2", 1, "LEND")
    w.share("QS3", 1, "RESERVE")
    return w


def counted_pass(w: World, metrics: SchedulerMetrics) -> list[ev.Event]:
    """One pass as the scheduler runs it: decide, count what is appended, fold it."""
    decisions = decide(w.state, w.policy)
    metrics.appended_decisions(w.state, decisions)
    for decision in decisions:
        w.apply(decision)
    w.decisions = decisions
    return decisions


UNIT = "ml.g5.xlarge"


def test_borrowing_and_waiting_after_the_first_pass() -> None:
    w = seed_world()
    for name, prio in (("high", 3), ("med", 2), ("low", 1)):
        w.submit(a_job(name=name, priority=prio).in_share("QS1"))
    w.pass_()
    w.start("high").start("med")

    found = samples(state_families(w.state))

    assert value(found, "quartermaster_jobs", queue="q", share="QS1", status="RUNNING") == 2
    assert value(found, "quartermaster_jobs", queue="q", share="QS1", status="RUNNABLE") == 1
    assert value(found, "quartermaster_jobs", queue="q", share="QS2", status="RUNNABLE") == 0
    pending = {
        labels: n
        for (name, labels), n in found.items()
        if name == "quartermaster_pending_jobs" and n
    }
    assert pending == {(("queue", "q"), ("reason", "RESERVE_HELD_BACK"), ("share", "QS1")): 1}
    share = {"queue": "q", "unit": UNIT}
    usage = "quartermaster_quota_share_resource_usage"
    assert [value(found, usage, share=s, **share) for s in ("QS1", "QS2", "QS3")] == [2, 0, 0]
    borrowed = "quartermaster_quota_share_borrowed_units"
    assert value(found, borrowed, share="QS1", **share) == 1
    lent = "quartermaster_quota_share_lent_units"
    assert [value(found, lent, share=s, **share) for s in ("QS1", "QS2", "QS3")] == [0, 1, 0]
    assert value(found, "quartermaster_quota_share_nominal_quota", share="QS3", **share) == 1
    assert value(found, "quartermaster_quota_share_borrowing_limit", share="QS1", **share) == 2
    assert (
        "quartermaster_quota_share_borrowing_limit",
        (*sorted({**share, "share": "QS2"}.items()),),
    ) not in found
    assert (
        value(found, "quartermaster_service_environment_usage", environment="env", unit=UNIT) == 2
    )
    assert value(found, "quartermaster_hosts", unit=UNIT, status="HEALTHY") == 3
    assert value(found, "quartermaster_hosts", unit=UNIT, status="LOST") == 0


def test_unassigned_capacity_is_lent_before_any_share() -> None:
    w = World().environment(ml_g5_xlarge=3).queue().hosts(3)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", 1, "LEND")  # 3 hosts, 2 units of limits: 1 unit is nobody's
    for name in ("a", "b"):
        w.submit(a_job(name=name).in_share("QS1"))
    w.pass_()

    found = samples(state_families(w.state))

    share = {"queue": "q", "unit": UNIT}
    assert value(found, "quartermaster_quota_share_borrowed_units", share="QS1", **share) == 1
    assert value(found, "quartermaster_quota_share_lent_units", share="QS2", **share) == 0


def test_warm_pools_and_lost_hosts_are_counted_by_status() -> None:
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 2, "RESERVE")
    w.submit(a_job(name="warm", keep_alive=600).in_share("QS1"))
    w.pass_()
    w.start("warm").succeed("warm")
    w.pass_()
    w.lose_host("h2")

    found = samples(state_families(w.state))

    pools = "quartermaster_warm_pools"
    assert value(found, pools, queue="q", share="QS1", status="Available") == 1
    assert value(found, pools, queue="q", share="QS1", status="Terminated") == 0
    assert value(found, "quartermaster_hosts", unit=UNIT, status="LOST") == 1
    assert value(found, "quartermaster_hosts", unit=UNIT, status="HEALTHY") == 1


def test_scheduler_counts_preemptions_by_kind_and_share() -> None:
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    w = seed_world()
    for name, prio in (("high", 3), ("med", 2), ("low", 1)):
        w.submit(a_job(name=name, priority=prio).in_share("QS1"))
    w.tick(5)
    counted_pass(w, metrics)
    w.start("high").start("med")
    w.submit(a_job(name="qs2_job_1", priority=1).in_share("QS2"))
    counted_pass(w, metrics)  # QS2 reclaims its lent unit from med
    w.confirm_stop("med")
    counted_pass(w, metrics)
    w.start("qs2_job_1")
    w.set_priority("low", 4)
    counted_pass(w, metrics)  # in-share: low outranks high
    w.confirm_stop("high")
    counted_pass(w, metrics)

    def get(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    preempted = "quartermaster_preempted_jobs_total"
    reclaim = {"queue": "q", "share": "QS1", "preempting_share": "QS2", "reason": "reclaim"}
    in_share = {"queue": "q", "share": "QS1", "preempting_share": "QS1", "reason": "in_share"}
    assert get(preempted, **reclaim) == 1
    assert get(preempted, **in_share) == 1
    assert get("quartermaster_warm_pool_misses_total", queue="q", share="QS1") == 3
    assert get("quartermaster_warm_pool_hits_total", queue="q", share="QS1") is None
    # First dispatches only: high and med after 5 s, low later; med's second is no wait.
    waits = "quartermaster_admission_wait_time_seconds_count"
    assert get(waits, queue="q", share="QS1") == 3
    assert get(waits, queue="q", share="QS2") == 1
    assert get("quartermaster_decisions_appended_total", decision="job.preemption_requested") == 2


def test_scheduler_counts_warm_pool_hits_and_billable_seconds() -> None:
    registry = CollectorRegistry()
    metrics = SchedulerMetrics(registry)
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE")
    w.submit(a_job(name="first", keep_alive=600).in_share("QS1"))
    counted_pass(w, metrics)
    w.start("first").succeed("first")
    counted_pass(w, metrics)  # the host stays warm
    w.tick(30)
    w.submit(a_job(name="second").in_share("QS1"))
    counted_pass(w, metrics)  # the matching job takes the pool

    def get(name: str) -> float | None:
        return registry.get_sample_value(name, {"queue": "q", "share": "QS1"})

    assert w.dispatched().get("second") is not None
    assert get("quartermaster_warm_pool_misses_total") == 1
    assert get("quartermaster_warm_pool_hits_total") == 1
    assert get("quartermaster_warm_pool_billable_seconds_total") == 30
