"""The scheduler's counters and histograms, updated where its decisions are made.

Counted once per decision that reached the log (a fenced append counts
nothing), by the instance that wrote it: summed over scheduler replicas, each
figure is the log's own.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram

from quartermaster import events as ev
from quartermaster.core.state import State
from quartermaster.events.reasons import Rule

PREEMPTION_KINDS = {
    Rule.RECLAIM: "reclaim",
    Rule.IN_SHARE: "in_share",
    Rule.LIMIT_LOWERED: "limit_lowered",
}
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)
PASS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
DECISION_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000)


def tag_of(event: ev.Event) -> str:
    return str(type(event).__struct_config__.tag)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """`registry`: where the metrics are exposed (None: a registry of their own)."""
        r = CollectorRegistry() if registry is None else registry
        share = ["queue", "share"]
        self.admission_wait = Histogram(
            "quartermaster_admission_wait_time_seconds",
            "Log time from a job's submission to its first dispatch",
            share,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.preempted = Counter(
            "quartermaster_preempted_jobs",
            "Preemptions asked, by kind (reclaim, in_share, limit_lowered), the victim's "
            "share and the share of the job it makes room for",
            [*share, "preempting_share", "reason"],
            registry=r,
        )
        self.lost_work = Counter(
            "quartermaster_preemption_lost_unit_seconds",
            "Work preemptions asked put at risk: the victim's units x its seconds since its "
            "last checkpoint (or its dispatch without one), by the victim's share",
            share,
            registry=r,
        )
        self.pool_hits = Counter(
            "quartermaster_warm_pool_hits",
            "Dispatches onto a matching Available warm pool",
            share,
            registry=r,
        )
        self.pool_misses = Counter(
            "quartermaster_warm_pool_misses",
            "Dispatches onto cold hosts (no matching Available pool was taken)",
            share,
            registry=r,
        )
        self.billable = Counter(
            "quartermaster_warm_pool_billable_seconds",
            "ResourceRetainedBillableTimeInSeconds of pools reused or terminated, by the "
            "share whose job left the pool",
            share,
            registry=r,
        )
        self.pass_duration = Histogram(
            "quartermaster_scheduling_pass_duration_seconds",
            "Wall time of one scheduling pass (decide only), by result (decided, idle)",
            ["result"],
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.pass_decisions = Histogram(
            "quartermaster_scheduling_pass_decisions",
            "Decisions one scheduling pass made",
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.appended = Counter(
            "quartermaster_decisions_appended",
            "Decisions this scheduler appended to the log, by event type",
            ["decision"],
            registry=r,
        )

    def observe_pass(self, seconds: float, decisions: int) -> None:
        self.pass_duration.labels("decided" if decisions else "idle").observe(seconds)
        self.pass_decisions.observe(decisions)

    def appended_decisions(self, state: State, decisions: Sequence[ev.Event]) -> None:
        """Count decisions now on the log; `state` is the one they were decided on."""
        for decision in decisions:
            self.appended.labels(tag_of(decision)).inc()
            if isinstance(decision, ev.JobDispatched):
                self._dispatched(state, decision)
            elif isinstance(decision, ev.JobPreemptionRequested):
                self._preempted(state, decision)
            elif isinstance(decision, ev.WarmPoolReused | ev.WarmPoolTerminated):
                pool = state.pools.get(decision.job_id)
                if pool is not None and decision.billable_seconds:
                    self.billable.labels(pool.queue, pool.share).inc(decision.billable_seconds)

    def _dispatched(self, state: State, decision: ev.JobDispatched) -> None:
        job = state.jobs.get(decision.job_id)
        if job is None:
            return
        labels = (job.queue, job.share)
        if decision.attempt == 1:
            self.admission_wait.labels(*labels).observe(max(0.0, decision.at - job.created_at))
        if decision.warm_pool is not None:
            self.pool_hits.labels(*labels).inc()
        else:
            self.pool_misses.labels(*labels).inc()

    def _preempted(self, state: State, decision: ev.JobPreemptionRequested) -> None:
        victim = state.jobs.get(decision.job_id)
        if victim is None or decision.rule not in PREEMPTION_KINDS:
            return
        winner = state.jobs.get(decision.for_job)
        preempting = winner.share if winner is not None else ""
        kind = PREEMPTION_KINDS[decision.rule]
        self.preempted.labels(victim.queue, victim.share, preempting, kind).inc()
        if decision.seconds_at_risk:
            lost = victim.count * decision.seconds_at_risk
            self.lost_work.labels(victim.queue, victim.share).inc(lost)
