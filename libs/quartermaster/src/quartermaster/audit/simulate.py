"""`qm simulate`: jobs against a candidate configuration, in simulated time, with the real core.

No processes and no clock: the simulated world is a State, a heap of future
inputs and the real pass. Hosts are perfect node agents: a dispatched attempt is
RUNNING at once and succeeds `duration` seconds later; a preempted one stops
`stopSeconds` later. A job of a share with a checkpoint interval reports
JobCheckpointed every interval while it runs (as node agents do after each upload
round), which the pass's victim order reads; a preempted attempt loses the work
since its last checkpoint, and its next attempt resumes from there. Without one,
it starts over from the beginning. After every instant's inputs the pass runs to
its fixpoint.

Figures per quota share (the share each job was submitted to, even where a
scenario pools the shares):

- utilization: unit-seconds held / (own limit x horizon), above 100 % when borrowing;
- wait: seconds a job spent RUNNABLE in all (re-queues after preemptions included),
  p50 and p90 by nearest rank over the jobs that ran to the end;
- preemptions: attempts of the share's jobs that were preempted;
- borrowed unit-hours: the time integral of max(0, held - own limit);
- lost unit-hours: what preempted attempts held from their last checkpoint (or their
  dispatch, without one) to their stop: work done again.

The horizon runs from the first arrival to the last instant anything happened.
"""

from __future__ import annotations

import heapq
import math
import multiprocessing
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor

import msgspec

from quartermaster import events as ev
from quartermaster.audit.gc_pause import paused_gc
from quartermaster.audit.simconfig import (
    ShareConfig,
    SimConfig,
    TraceJob,
    checkpoints,
    without_checkpoints,
)
from quartermaster.core import State, decide, fold
from quartermaster.core.model import ACTIVE_STATUSES, JobStatus, StopCause
from quartermaster.core.preemption import saved_at

QUEUE = "sim"
ENVIRONMENT = "sim-env"
POLICY = "fifo"
MAX_ROUNDS = 64

# same-instant order: arrivals first
_ARRIVE, _STOP, _FINISH, _TICK, _CHECKPOINT = 0, 1, 2, 3, 4


class SimJob(msgspec.Struct, frozen=True):
    job_id: str
    share: str  # the share it is scheduled in
    label: str  # the share its figures count for
    unit: str
    count: int
    priority: int
    arrival: float
    duration: float
    keep_alive: int = 0


class ShareFigures(msgspec.Struct, frozen=True):
    share: str
    jobs: int
    finished: int
    utilization: float | None  # None: no own limit
    unit_hours: float
    wait_p50: float | None
    wait_p90: float | None
    preemptions: int
    borrowed_unit_hours: float
    lost_unit_hours: float  # held by attempts that were preempted: work done again


class Timeline(msgspec.Struct, frozen=True):
    """Units held per share, a step function: `held[share][i]` from `times[i]` on."""

    times: list[float]
    held: dict[str, list[int]]


class Outcome(msgspec.Struct, frozen=True):
    scenario: str
    horizon: float
    capacity: int
    utilization: float
    shares: list[ShareFigures]
    timeline: Timeline
    passes: int


def trace_jobs(trace: Iterable[TraceJob]) -> list[SimJob]:
    jobs = []
    for i, t in enumerate(trace):
        assert t.instance_type is not None
        jobs.append(
            SimJob(
                t.name or f"job-{i + 1}",
                t.share,
                t.share,
                t.instance_type,
                t.instance_count,
                t.priority,
                t.arrival,
                t.duration,
            )
        )
    return jobs


def _config_events(config: SimConfig, at: float) -> list[ev.Event]:
    limits = tuple(ev.CapacityLimit(u, n) for u, n in sorted(config.capacity.items()))
    out: list[ev.Event] = [
        ev.ServiceEnvironmentCreated(at=at, name=ENVIRONMENT, capacity_limits=limits),
        ev.SchedulingPolicyCreated(at=at, name=POLICY),
        ev.JobQueueCreated(
            at=at, name=QUEUE, service_environment=ENVIRONMENT, scheduling_policy=POLICY
        ),
    ]
    for unit, n in sorted(config.capacity.items()):
        for i in range(n):
            out.append(ev.HostRegistered(at=at, host_id=f"{unit}-{i:05d}", instance_type=unit))
    for share in config.shares:
        out.append(
            ev.QuotaShareCreated(
                at=at,
                job_queue=QUEUE,
                name=share.name,
                capacity_limits=tuple(
                    ev.CapacityLimit(u, n) for u, n in sorted(share.limits.items())
                ),
                strategy=share.strategy,
                borrow_limit=share.borrow_limit,
                in_share_preemption=share.in_share_preemption,
            )
        )
    return out


class _World:
    def __init__(self, config: SimConfig, jobs: Sequence[SimJob], labels: dict[str, ShareConfig]):
        self.config = config
        self.state = State()
        self.jobs = {j.job_id: j for j in jobs}
        self.labels = labels
        self.heap: list[tuple[float, int, int, str, int]] = []
        self.n = 0
        self.passes = 0
        self.held: dict[tuple[str, str], int] = defaultdict(int)  # (label, unit) -> units
        self.job_held: dict[str, tuple[str, str, int]] = {}  # job or pool id -> its hold
        self.unit_seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.borrowed_seconds: dict[str, float] = defaultdict(float)
        self.waits: dict[str, list[float]] = defaultdict(list)
        self.waiting_since: dict[str, float] = {}
        self.waited: dict[str, float] = defaultdict(float)
        self.preemptions: dict[str, int] = defaultdict(int)
        self.lost_seconds: dict[str, float] = defaultdict(float)
        self.interval = {label: s.checkpoint_interval_seconds for label, s in labels.items()}
        self.saved: dict[str, float] = defaultdict(float)  # job -> seconds of work kept
        self.attempt_start: dict[str, tuple[float, float]] = {}  # job -> (dispatch, saved)
        self.times: list[float] = []
        self.series: dict[str, list[int]] = {label: [] for label in labels}
        self.last_t: float | None = None

    def push(self, t: float, kind: int, job_id: str = "", attempt: int = 0) -> None:
        self.n += 1
        heapq.heappush(self.heap, (t, kind, self.n, job_id, attempt))

    # ---- the loop ---------------------------------------------------------
    def run(self) -> float:
        start = min((j.arrival for j in self.jobs.values()), default=0.0)
        for event in _config_events(self.config, start):
            fold(self.state, event)
        for job in self.jobs.values():
            self.push(job.arrival, _ARRIVE, job.job_id)
        t = start
        while self.heap:
            t = self.heap[0][0]
            self._account(t)
            changed = False
            while self.heap and self.heap[0][0] == t:
                _, kind, _, job_id, attempt = heapq.heappop(self.heap)
                changed |= self._input(t, kind, job_id, attempt)
            if changed:  # an instant where only stale attempts ended changes nothing
                self._settle(t)
            self.times.append(t)
            for label, series in self.series.items():
                series.append(sum(self.held[(label, u)] for u in self.config.capacity))
        return t - start

    def _account(self, t: float) -> None:
        if self.last_t is not None and t > self.last_t:
            dt = t - self.last_t
            for (label, unit), units in self.held.items():
                if units:
                    self.unit_seconds[(label, unit)] += units * dt
                    over = units - self.labels[label].limits.get(unit, 0)
                    if over > 0:
                        self.borrowed_seconds[label] += over * dt
        self.last_t = t

    def _input(self, t: float, kind: int, job_id: str, attempt: int) -> bool:
        """Fold what happens now; False when nothing did (a stale attempt's end)."""
        if kind == _TICK:
            fold(self.state, ev.ClockTicked(at=t))
            return True
        if kind == _ARRIVE:
            self._submit(t, self.jobs[job_id])
            return True
        job = self.state.jobs[job_id]
        if job.attempt_no != attempt or not job.hosts or job.awaiting_outcome:
            return False  # an attempt that ended otherwise (preempted, then run again)
        if kind == _CHECKPOINT:
            self._checkpoint(t, job_id, attempt, job.hosts[0])
            return True
        if kind == _FINISH and job.stop_cause is not None:
            return False  # its stop is on its way; the stop settles the attempt
        if kind == _STOP and job.stop_cause is StopCause.PREEMPTED:
            plan = self.jobs[job_id]
            self.lost_seconds[plan.label] += plan.count * (t - saved_at(job))
        for host in job.hosts:
            if kind == _FINISH:
                fold(self.state, ev.JobSucceeded(at=t, job_id=job_id, attempt=attempt, host=host))
            else:
                fold(
                    self.state, ev.JobStopConfirmed(at=t, job_id=job_id, attempt=attempt, host=host)
                )
        self._after_end(t, job_id)
        return True

    def _checkpoint(self, t: float, job_id: str, attempt: int, host: str) -> None:
        """An upload round of the attempt ends: its work so far is kept; the next is due."""
        fold(self.state, ev.JobCheckpointed(at=t, job_id=job_id, attempt=attempt, host=host))
        started, base = self.attempt_start[job_id]
        self.saved[job_id] = base + (t - started)
        self._next_checkpoint(t, job_id, attempt)

    def _next_checkpoint(self, t: float, job_id: str, attempt: int) -> None:
        plan = self.jobs[job_id]
        interval = self.interval.get(plan.label)
        if interval is None:
            return
        started, base = self.attempt_start[job_id]
        if t + interval < started + plan.duration - base:  # before the attempt's end
            self.push(t + interval, _CHECKPOINT, job_id, attempt)

    def _submit(self, t: float, job: SimJob) -> None:
        fold(
            self.state,
            ev.JobSubmitted(
                at=t,
                job_id=job.job_id,
                job_name=job.job_id,
                job_queue=QUEUE,
                quota_share=job.share,
                instance_type=job.unit,
                instance_count=job.count,
                scheduling_priority=job.priority,
                keep_alive_seconds=job.keep_alive,
                warm_pool_key=ev.WarmPoolKey(instance_type=job.unit, instance_count=job.count),
            ),
        )
        self.waiting_since[job.job_id] = t

    def _after_end(self, t: float, job_id: str) -> None:
        job = self.state.jobs[job_id]
        if not job.hosts and not job.retained:
            self._release(job_id)
        if job.status is JobStatus.RUNNABLE:
            self.waiting_since[job_id] = t  # preempted: waits again
        elif job.status is JobStatus.SUCCEEDED:
            self.waits[self.jobs[job_id].label].append(self.waited[job_id])

    def _hold(self, key: str, label: str, unit: str, count: int) -> None:
        self.job_held[key] = (label, unit, count)
        self.held[(label, unit)] += count

    def _release(self, key: str) -> None:
        hold = self.job_held.pop(key, None)
        if hold is not None:
            label, unit, count = hold
            self.held[(label, unit)] -= count

    # ---- the pass and what the hosts do about it ---------------------------
    def _settle(self, t: float) -> None:
        for _ in range(MAX_ROUNDS):
            decisions = decide(self.state)
            self.passes += 1
            if not decisions:
                return
            for decision in decisions:
                fold(self.state, decision)
                self._react(t, decision)
        raise RuntimeError("scheduling pass did not settle")  # a core bug: passes converge

    def _react(self, t: float, d: ev.Event) -> None:
        match d:
            case ev.JobDispatched():
                job = self.state.jobs[d.job_id]
                if job.status not in ACTIVE_STATUSES or job.attempt_no != d.attempt:
                    return
                plan = self.jobs[d.job_id]
                self.waited[d.job_id] += t - self.waiting_since.pop(d.job_id, t)
                self._hold(d.job_id, plan.label, plan.unit, plan.count)
                for host in d.hosts:
                    fold(
                        self.state,
                        ev.JobRunning(at=t, job_id=d.job_id, attempt=d.attempt, host=host),
                    )
                base = self.saved[d.job_id]  # resumes from its last checkpoint
                self.attempt_start[d.job_id] = (t, base)
                self.push(t + plan.duration - base, _FINISH, d.job_id, d.attempt)
                self._next_checkpoint(t, d.job_id, d.attempt)
            case ev.JobPreemptionRequested():
                self.preemptions[self.jobs[d.job_id].label] += 1
                self.push(t + self.config.stop_seconds, _STOP, d.job_id, d.attempt)
            case ev.WarmPoolAvailable():
                self.push(d.expires_at, _TICK)
                hold = self.job_held.pop(d.job_id, None)
                if hold is not None:
                    self.job_held[f"pool:{d.job_id}"] = hold
            case ev.WarmPoolReused() | ev.WarmPoolTerminated():
                self._release(f"pool:{d.job_id}")
            case ev.JobRetried() | ev.JobFinallyFailed():
                self._after_end(t, d.job_id)

    # ---- figures ------------------------------------------------------------
    def figures(self, scenario: str, horizon: float) -> Outcome:
        capacity = sum(self.config.capacity.values())
        total_seconds = sum(self.unit_seconds.values())
        counts: dict[str, int] = defaultdict(int)
        for job in self.jobs.values():
            counts[job.label] += 1
        shares = []
        for label, share in self.labels.items():
            own = sum(share.limits.values())
            used = sum(s for (lb, _), s in self.unit_seconds.items() if lb == label)
            waits = sorted(self.waits[label])
            shares.append(
                ShareFigures(
                    label,
                    counts[label],
                    len(waits),
                    used / (own * horizon) if own and horizon > 0 else None,
                    used / 3600,
                    nearest_rank(waits, 50),
                    nearest_rank(waits, 90),
                    self.preemptions[label],
                    self.borrowed_seconds[label] / 3600,
                    self.lost_seconds[label] / 3600,
                )
            )
        return Outcome(
            scenario,
            horizon,
            capacity,
            total_seconds / (capacity * horizon) if capacity and horizon > 0 else 0.0,
            shares,
            Timeline(self.times, self.series),
            self.passes,
        )


def nearest_rank(sorted_values: Sequence[float], percent: float) -> float | None:
    if not sorted_values:
        return None
    rank = max(1, math.ceil(percent / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def simulate(
    config: SimConfig,
    jobs: Sequence[SimJob],
    scenario: str = "candidate",
    labels: Sequence[ShareConfig] | None = None,
) -> Outcome:
    """Run `jobs` on `config`; figures count for `labels` (default: the config's shares)."""
    by_label = {s.name: s for s in (labels if labels is not None else config.shares)}
    world = _World(config, jobs, by_label)
    horizon = world.run()
    return world.figures(scenario, horizon)


# ---- the two references a candidate is compared with ---------------------------


def reserve_only(config: SimConfig) -> SimConfig:
    """The same limits as a static split: every share RESERVE (never lends or borrows)."""
    shares = [
        msgspec.structs.replace(s, strategy=ev.SharingStrategy.RESERVE, borrow_limit=-1)
        for s in config.shares
    ]
    return msgspec.structs.replace(config, shares=shares)


POOLED = "(pooled)"


def pooled(config: SimConfig) -> SimConfig:
    """The work-conserving bound: one queue over all the capacity, no limits, no preemption."""
    share = ShareConfig(POOLED, dict(config.capacity), ev.SharingStrategy.LEND_AND_BORROW)
    return msgspec.structs.replace(config, shares=[share])


NO_CHECKPOINTS = "no checkpoints"


class Comparison(msgspec.Struct, frozen=True):
    candidate: Outcome
    reserve_only: Outcome
    pooled: Outcome
    # The candidate with no share checkpointing; None when the candidate has none anyway.
    no_checkpoints: Outcome | None = None
    checkpoint_intervals: dict[str, float] = {}  # share -> seconds, in the candidate

    def outcomes(self) -> list[Outcome]:
        plain = [] if self.no_checkpoints is None else [self.no_checkpoints]
        return [self.candidate, *plain, self.reserve_only, self.pooled]


def lost_unit_hours(outcome: Outcome) -> float:
    """Unit-hours preemptions threw away in this outcome, every share together."""
    return sum(share.lost_unit_hours for share in outcome.shares)


Scenario = tuple[str, SimConfig, list[SimJob], list[ShareConfig]]


def scenarios(config: SimConfig, jobs: Sequence[SimJob]) -> list[Scenario]:
    """The candidate and its references, each with the jobs as it schedules them and the
    shares its figures count for (their checkpoint intervals apply in every scenario);
    with checkpoints, the candidate without them too."""
    runs: list[Scenario] = [
        ("candidate", config, list(jobs), config.shares),
        ("reserve-only", reserve_only(config), list(jobs), config.shares),
        (
            "pooled bound",
            pooled(config),
            [msgspec.structs.replace(j, share=POOLED) for j in jobs],
            config.shares,
        ),
    ]
    if checkpoints(config):
        plain = without_checkpoints(config)
        runs.insert(1, (NO_CHECKPOINTS, plain, list(jobs), plain.shares))
    return runs


def _simulate_scenario(
    name: str, config: SimConfig, jobs: list[SimJob], labels: list[ShareConfig]
) -> Outcome:
    with paused_gc():
        return simulate(config, jobs, name, labels=labels)


def compare(config: SimConfig, jobs: Sequence[SimJob], workers: int = 1) -> Comparison:
    """The candidate and its references, on up to `workers` processes (one per scenario)."""
    runs = scenarios(config, jobs)
    names = [name for name, _, _, _ in runs]
    configs = [cfg for _, cfg, _, _ in runs]
    scenario_jobs = [js for _, _, js, _ in runs]
    labels = [shares for _, _, _, shares in runs]
    if workers <= 1:
        outcomes = list(map(_simulate_scenario, names, configs, scenario_jobs, labels))
    else:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(workers, len(runs)), mp_context=context) as pool:
            outcomes = list(pool.map(_simulate_scenario, names, configs, scenario_jobs, labels))
    by_name = dict(zip(names, outcomes, strict=True))
    return Comparison(
        by_name["candidate"],
        by_name["reserve-only"],
        by_name["pooled bound"],
        by_name.get(NO_CHECKPOINTS),
        checkpoints(config),
    )
