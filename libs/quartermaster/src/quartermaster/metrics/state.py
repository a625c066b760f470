"""Gauges read off the folded state when Prometheus scrapes: no bookkeeping per event.

Jobs by status, pending jobs by wait reason, quota use, borrowed and lent units,
warm pools by status and hosts by state are all pure functions of one `State`,
so `state_families` builds them from scratch at each scrape (one walk over the
jobs, one explained allocation step for the wait reasons) and nothing can drift.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from quartermaster.core.capacity import CapacityView
from quartermaster.core.hosts_picker import HostPicker
from quartermaster.core.model import HostStatus, JobStatus, Share, WarmPoolStatus
from quartermaster.core.state import State
from quartermaster.core.wait_reasons import WaitCode
from quartermaster.core.waiting import Explainer
from quartermaster.events import SharingStrategy
from quartermaster.metrics.onloop import LoopCollector

SHARE_LABELS = ["queue", "share"]
UNIT_LABELS = ["queue", "share", "unit"]


def _families() -> dict[str, GaugeMetricFamily]:
    gauges = [
        (
            "jobs",
            "Service jobs by status, per job queue and quota share",
            [*SHARE_LABELS, "status"],
        ),
        (
            "pending_jobs",
            "RUNNABLE jobs by why they wait (WaitReason code), per job queue and quota share",
            [*SHARE_LABELS, "reason"],
        ),
        (
            "quota_share_resource_usage",
            "Units a quota share holds: its active jobs, stops not yet confirmed, Available pools",
            UNIT_LABELS,
        ),
        ("quota_share_nominal_quota", "A quota share's own limit (capacityLimits)", UNIT_LABELS),
        (
            "quota_share_borrowing_limit",
            "Units a LEND_AND_BORROW share may borrow above its limit (absent: unlimited)",
            UNIT_LABELS,
        ),
        (
            "quota_share_borrowed_units",
            "Units a quota share holds above its own limit",
            UNIT_LABELS,
        ),
        (
            "quota_share_lent_units",
            "Idle units of a lending share that borrowers hold (unassigned capacity counts first)",
            UNIT_LABELS,
        ),
        (
            "service_environment_capacity",
            "A service environment's maxCapacity",
            ["environment", "unit"],
        ),
        (
            "service_environment_usage",
            "Units of a service environment in use",
            ["environment", "unit"],
        ),
        ("warm_pools", "Managed warm pools by status", [*SHARE_LABELS, "status"]),
        ("hosts", "Registered hosts by state", ["unit", "status"]),
    ]
    return {
        name: GaugeMetricFamily(f"quartermaster_{name}", text, labels=labels)
        for name, text, labels in gauges
    }


def describe_state() -> list[Metric]:
    return list(_families().values())


def state_families(state: State) -> list[Metric]:
    """Every state-derived gauge for one folded state."""
    out = _families()
    shares = sorted(state.shares.values(), key=lambda s: (s.queue, s.name))
    _jobs(state, shares, out)
    _pending(state, shares, out)
    _quota(state, shares, out)
    _pools(state, shares, out)
    for env in sorted(state.environments.values(), key=lambda e: e.name):
        for unit, units in sorted(env.max_capacity.items()):
            out["service_environment_capacity"].add_metric([env.name, unit], units)
            out["service_environment_usage"].add_metric(
                [env.name, unit], state.env_use.get((env.name, unit), 0)
            )
    hosts = Counter((h.unit, h.status) for h in state.hosts.values())
    for unit in sorted({h.unit for h in state.hosts.values()}):
        for status in HostStatus:
            out["hosts"].add_metric([unit, status.value], hosts[(unit, status)])
    return list(out.values())


def _jobs(state: State, shares: list[Share], out: dict[str, GaugeMetricFamily]) -> None:
    counts = Counter((j.queue, j.share, j.status) for j in state.jobs.values())
    for share in shares:
        for status in JobStatus:
            count = counts[(share.queue, share.name, status)]
            out["jobs"].add_metric([share.queue, share.name, status.value], count)


def _pending(state: State, shares: list[Share], out: dict[str, GaugeMetricFamily]) -> None:
    explainer = Explainer(state)
    counts: Counter[tuple[str, str, WaitCode]] = Counter()
    for key, runnable in list(state.runnable.items()):  # the explainer may add empty keys
        for entry in runnable:
            job = state.jobs[entry[-1]]
            reason = explainer.why(job.job_id)
            counts[(key[0], key[1], reason.code if reason else WaitCode.AWAITING_PASS)] += 1
    for share in shares:
        for code in WaitCode:
            count = counts[(share.queue, share.name, code)]
            out["pending_jobs"].add_metric([share.queue, share.name, code.value], count)


def _units(state: State, share: Share) -> list[str]:
    held = {u for (q, s, u), n in state.use.items() if q == share.queue and s == share.name and n}
    return sorted(set(share.limits) | held)


def _quota(state: State, shares: list[Share], out: dict[str, GaugeMetricFamily]) -> None:
    lent = _lent(state, shares)
    for share in shares:
        for unit in _units(state, share):
            labels = [share.queue, share.name, unit]
            used, own = state.use.get((share.queue, share.name, unit), 0), share.own(unit)
            out["quota_share_resource_usage"].add_metric(labels, used)
            out["quota_share_nominal_quota"].add_metric(labels, own)
            cap = share.cap(unit)
            if share.strategy is SharingStrategy.LEND_AND_BORROW and cap is not None:
                out["quota_share_borrowing_limit"].add_metric(labels, cap - own)
            out["quota_share_borrowed_units"].add_metric(labels, max(0, used - own))
            given = lent.get((share.queue, share.name, unit), 0)
            out["quota_share_lent_units"].add_metric(labels, given)


def _lent(state: State, shares: list[Share]) -> dict[tuple[str, str, str], int]:
    """Which lenders' idle units the borrowed units stand on.

    Spec section 3 charges borrowing to the pool of idle units, not to one lender:
    unassigned capacity (nobody's) is counted first, then lenders' idle units in
    name order, so the total lent equals the total borrowed above unassigned capacity.
    """
    lent: dict[tuple[str, str, str], int] = {}
    picker = HostPicker(state)
    pairs = sorted({(s.queue, u) for s in shares for u in _units(state, s)})
    for queue, unit in pairs:
        if queue not in state.queues or state.environment_of(queue) not in state.environments:
            continue
        view = CapacityView(state, queue, unit, picker)
        capacity = view.env_use + view.physical_free()
        unassigned = max(0, capacity - sum(view.own(n) for n in view.shares))
        remaining = max(0, view.borrowed() - unassigned)
        for name, share in sorted(view.shares.items()):
            if remaining <= 0:
                break
            if share.strategy in (SharingStrategy.LEND, SharingStrategy.LEND_AND_BORROW):
                given = min(view.idle(name), remaining)
                lent[(queue, name, unit)] = given
                remaining -= given
    return lent


def _pools(state: State, shares: list[Share], out: dict[str, GaugeMetricFamily]) -> None:
    counts = Counter((p.queue, p.share, p.status) for p in state.pools.values())
    for share in shares:
        for status in WarmPoolStatus:
            count = counts[(share.queue, share.name, status)]
            out["warm_pools"].add_metric([share.queue, share.name, status.value], count)


class StateCollector(LoopCollector):
    """The state-derived gauges of whichever state `source` returns (None: nothing yet).

    `source` is read on the event loop that folds the state, never on the
    scrape thread, so a scrape sees one consistent position of the log.
    """

    def __init__(self, source: Callable[[], State | None]) -> None:
        super().__init__()
        self._source = source

    def describe(self) -> Iterable[Metric]:
        return describe_state()

    async def families(self) -> list[Metric]:
        state = self._source()
        return [] if state is None else state_families(state)
