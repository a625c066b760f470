"""Property-based tests: random histories keep every invariant of spec section 4.

After every step the pass is run to its fixpoint and the invariants are
checked (and every waiting job has a reason); every submission is dry-run
first, and the pass must then do what the dry run said; at the end the whole
log is replayed from scratch and must rebuild the same state, with the pass
deciding exactly what was recorded.
"""

from __future__ import annotations

import os
from typing import Any

import hypothesis.strategies as st
import msgspec
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sortedcontainers import SortedList

from quartermaster import events as ev
from quartermaster.core import DryRun, Explainer, State, WaitCode, decide, dry_run, fold
from quartermaster.core.model import JobStatus
from quartermaster.core.preemption import seconds_at_risk
from quartermaster.core.snapshot import restore, take
from quartermaster.testing.builders import JobSpec, World, a_job
from quartermaster.testing.invariants import (
    check_allocation,
    check_limits,
    check_reserve_respected,
    check_work_conservation,
    reserve_shortfall,
    snapshot,
)

SHARES = [
    ("A", "LEND_AND_BORROW", 100),
    ("B", "LEND", -1),
    ("C", "RESERVE", -1),
    ("D", "LEND_AND_BORROW", -1),
]
UNIT = "ml.g5.xlarge"


class SchedulerHistory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.w = World()
        self.w.environment(ml_g5_xlarge=6).queue().hosts(6)
        self.limits = {}
        for name, strategy, borrow in SHARES:
            self.limits[name] = 2 if name != "D" else 0
            self.w.share(
                name, self.limits[name], strategy, borrow_limit=borrow, preemption=name == "A"
            )
        self.batches: list[tuple[bool, list[ev.Event]]] = [(False, list(self.w.log))]
        self.exempt: set[tuple[str, str]] = set()
        self.n = 0

    def _input(self, *events: ev.Event) -> None:
        for event in events:
            self.w.apply(event)
        self.batches.append((False, list(events)))

    def _settle(self) -> None:
        while True:
            decisions = decide(self.w.state)
            assert decisions == decide(self.w.state), "the pass is not deterministic"
            if not decisions:
                return
            taken = {d.job_id for d in decisions if isinstance(d, ev.JobPreemptionRequested)}
            for d in decisions:
                if isinstance(d, ev.JobPreemptionRequested):
                    self._check_preemption(d, taken)
            before = reserve_shortfall(self.w.state)
            for d in decisions:
                fold(self.w.state, d)
            # Record the batch first: a failed check must not hide it from the replay.
            self.w.log.extend(decisions)
            self.batches.append((True, decisions))
            given = {
                (self.w.job(d.job_id).queue, self.w.job(d.job_id).share, self.w.job(d.job_id).unit)
                for d in decisions
                if isinstance(d, ev.JobDispatched)
            }
            check_reserve_respected(self.w.state, given, before)

    def _check_preemption(self, d: ev.JobPreemptionRequested, taken: set[str]) -> None:
        victim, target = self.w.job(d.job_id), self.w.job(d.for_job)
        assert target.status is JobStatus.RUNNABLE, "preempted for a job that is not waiting"
        if victim.share == target.share:
            share = self.w.state.shares[("q", victim.share)]
            assert share.in_share_preemption is ev.State.ENABLED
            assert victim.priority < target.priority, "in-share victim not of lower priority"
        at_risk = seconds_at_risk(victim, d.at)
        assert d.seconds_at_risk == at_risk, "the decision records another figure"
        # Least work lost: no running job the rule ranks alike (same share, priority and
        # size: either frees the same units under the same rule) was passed over with less
        # at risk. Without checkpoints that is today's "most recently started first".
        for entry in self.w.state.victims.get(("q", victim.share, UNIT), ()):
            other = self.w.job(entry[-1])
            if other.job_id in taken or (other.priority, other.count) != (
                victim.priority,
                victim.count,
            ):
                continue
            assert seconds_at_risk(other, d.at) >= at_risk, (
                f"{victim.job_id} ({at_risk} s at risk) taken over {other.job_id} "
                f"({seconds_at_risk(other, d.at)} s)"
            )

    def _jobs(self, *statuses: JobStatus) -> list[str]:
        return sorted(
            j.job_id
            for j in self.w.state.jobs.values()
            if j.status in statuses and j.hosts and not j.awaiting_outcome
        )

    @rule(
        share=st.sampled_from([s[0] for s in SHARES]),
        priority=st.integers(0, 5),
        count=st.sampled_from([1, 1, 1, 2, 3]),
        keep_alive=st.sampled_from([0, 0, 60]),
        attempts=st.integers(1, 3),
        role=st.sampled_from(["r1", "r2"]),
        timeout=st.sampled_from([None, None, 45]),
        preemption_retries=st.sampled_from([None, None, 0, 1]),
        exit_rule=st.sampled_from(
            [(), (ev.EvaluateOnExit(action="EXIT", on_status_reason="algo*"),)]
        ),
    )
    def submit(
        self,
        share: str,
        priority: int,
        count: int,
        keep_alive: int,
        attempts: int,
        role: str,
        timeout: int | None,
        preemption_retries: int | None,
        exit_rule: tuple[ev.EvaluateOnExit, ...],
    ) -> None:
        self.n += 1
        self.w.clock += 0.5
        spec = a_job(
            name=f"j{self.n}",
            share=share,
            priority=priority,
            count=count,
            keep_alive=keep_alive,
            attempts=attempts,
            timeout=timeout,
            preemption_retries=preemption_retries,
            evaluate_on_exit=exit_rule,
            key=ev.WarmPoolKey(role_arn=role, instance_type=UNIT, instance_count=count),
        )
        answer = self._dry_run(spec)
        before = len(self.w.log)
        self.w.submit(spec)
        self.batches.append((False, self.w.log[before:]))
        decided = len(self.w.log)
        self._settle()
        self._check_dry_run(answer, self.w.log[decided:])

    def _dry_run(self, spec: JobSpec) -> DryRun:
        """Dry-run the submission `World.submit` is about to fold; nothing may change."""
        event = ev.JobSubmitted(
            at=self.w.clock + 0.001,
            job_id=spec.name,
            job_name=spec.name,
            job_queue=spec.queue,
            quota_share=spec.share,
            instance_type=spec.unit,
            instance_count=spec.count,
            scheduling_priority=spec.priority,
            retry_attempts=spec.attempts,
            evaluate_on_exit=spec.evaluate_on_exit,
            preemption_retries=spec.preemption_retries,
            attempt_duration_seconds=spec.timeout,
            keep_alive_seconds=spec.keep_alive,
            warm_pool_key=spec.key
            or ev.WarmPoolKey(instance_type=spec.unit, instance_count=spec.count),
        )
        before = whole(self.w.state)
        answer = dry_run(self.w.state, event)
        assert whole(self.w.state) == before, "a dry run changed the state"
        return answer

    def _check_dry_run(self, answer: DryRun, decided: list[ev.Event]) -> None:
        """The pass did what the dry run said it would."""
        job_id = answer.job_id
        dispatch = [d for d in decided if isinstance(d, ev.JobDispatched) and d.job_id == job_id]
        assert bool(dispatch) == answer.starts, "the dry run was wrong about the start"
        if dispatch:
            assert (dispatch[0].hosts, dispatch[0].warm_pool) == (answer.hosts, answer.warm_pool)
        preempted = tuple(
            d.job_id
            for d in decided
            if isinstance(d, ev.JobPreemptionRequested) and d.for_job == job_id
        )
        evicted = tuple(
            d.job_id
            for d in decided
            if isinstance(d, ev.WarmPoolTerminated) and d.for_job == job_id
        )
        assert (preempted, evicted) == (answer.preempts, answer.evicts)
        if not answer.starts:
            assert answer.wait is not None
            now = Explainer(self.w.state).why(job_id)
            assert now is not None and now.code is answer.wait.code

    @rule(data=st.data(), priority=st.integers(0, 5))
    def reprioritise(self, data: st.DataObject, priority: int) -> None:
        live = sorted(
            j.job_id
            for j in self.w.state.jobs.values()
            if j.status not in (JobStatus.SUCCEEDED, JobStatus.FAILED)
        )
        if live:
            job_id = data.draw(st.sampled_from(live))
            self._input(
                ev.JobPriorityUpdated(at=self.w.clock, job_id=job_id, scheduling_priority=priority)
            )
            self._settle()

    @rule(data=st.data())
    def start(self, data: st.DataObject) -> None:
        jobs = [j for j in self._jobs(JobStatus.SCHEDULED) if self.w.job(j).stop_cause is None]
        if jobs:
            job = self.w.job(data.draw(st.sampled_from(jobs)))
            for host in job.hosts:
                self._input(
                    ev.JobStarting(
                        at=self.w.clock, job_id=job.job_id, attempt=job.attempt_no, host=host
                    ),
                    ev.JobRunning(
                        at=self.w.clock, job_id=job.job_id, attempt=job.attempt_no, host=host
                    ),
                )
            self._settle()

    @rule(data=st.data(), late=st.booleans())
    def checkpoint(self, data: st.DataObject, late: bool) -> None:
        """A node agent finished an upload round of a live attempt (or, `late`, a report
        of the attempt before it arrives after the job was dispatched again)."""
        jobs = self._jobs(JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING)
        if jobs:
            job = self.w.job(data.draw(st.sampled_from(jobs)))
            self.w.clock += data.draw(st.sampled_from([0.5, 7.0, 40.0]))
            attempt = job.attempt_no - 1 if late else job.attempt_no
            self._input(
                ev.JobCheckpointed(
                    at=self.w.clock, job_id=job.job_id, attempt=attempt, host=job.hosts[0]
                )
            )
            self._settle()

    @rule(data=st.data(), outcome=st.sampled_from(["ok", "algo", "infra"]))
    def finish(self, data: st.DataObject, outcome: str) -> None:
        jobs = self._jobs(JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING)
        if not jobs:
            return
        job = self.w.job(data.draw(st.sampled_from(jobs)))
        at = self.w.clock
        for host in job.hosts:
            if host in job.ended_hosts:
                continue
            if outcome == "ok":
                self._input(
                    ev.JobSucceeded(at=at, job_id=job.job_id, attempt=job.attempt_no, host=host)
                )
            else:
                cls = (
                    ev.FailureClass.ALGORITHM_ERROR
                    if outcome == "algo"
                    else ev.FailureClass.INFRASTRUCTURE_ERROR
                )
                self._input(
                    ev.JobFailed(
                        at=at,
                        job_id=job.job_id,
                        attempt=job.attempt_no,
                        host=host,
                        reason=f"{outcome} failure",
                        failure_class=cls,
                        exit_code=1,
                    )
                )
        self._settle()

    @rule()
    def confirm_stops(self) -> None:
        for job in sorted(self.w.state.jobs.values(), key=lambda j: j.job_id):
            if job.stop_cause is not None and job.hosts and not job.awaiting_outcome:
                for host in job.hosts:
                    if host not in job.ended_hosts:
                        self._input(
                            ev.JobStopConfirmed(
                                at=self.w.clock,
                                job_id=job.job_id,
                                attempt=job.attempt_no,
                                host=host,
                            )
                        )
        self._settle()

    @rule(data=st.data())
    def terminate(self, data: st.DataObject) -> None:
        live = sorted(
            j.job_id
            for j in self.w.state.jobs.values()
            if j.status not in (JobStatus.SUCCEEDED, JobStatus.FAILED)
        )
        if live:
            job_id = data.draw(st.sampled_from(live))
            self._input(ev.JobTerminationRequested(at=self.w.clock, job_id=job_id, reason="user"))
            self._settle()

    @rule(host=st.integers(1, 6))
    def lose_host(self, host: int) -> None:
        self._input(ev.HostLost(at=self.w.clock, host_id=f"h{host}"))
        self._settle()

    @rule(host=st.integers(1, 6))
    def register_host(self, host: int) -> None:
        h = self.w.state.hosts.get(f"h{host}")
        if h is not None and h.status.value != "HEALTHY" and h.holder is None:
            self._input(ev.HostRegistered(at=self.w.clock, host_id=f"h{host}", instance_type=UNIT))
            self._settle()

    @rule(share=st.sampled_from(["A", "B", "C"]), limit=st.integers(0, 4))
    def change_limit(self, share: str, limit: int) -> None:
        name, strategy, borrow = next(s for s in SHARES if s[0] == share)
        if limit < self.limits[share]:
            self.exempt.add(("q", share))
        self.limits[share] = limit
        before = len(self.w.log)
        self.w.share(
            name, limit, strategy, borrow_limit=borrow, preemption=name == "A", updated=True
        )
        self.batches.append((False, self.w.log[before:]))
        self._settle()

    @rule(seconds=st.sampled_from([1, 30, 61, 200]))
    def tick(self, seconds: int) -> None:
        self.w.clock += seconds
        self._input(ev.ClockTicked(at=self.w.clock))
        self._settle()

    @invariant()
    def invariants_hold(self) -> None:
        check_allocation(self.w.state)
        check_limits(self.w.state, self.exempt)
        check_work_conservation(self.w.state)
        check_every_waiting_job_has_a_reason(self.w.state)

    def teardown(self) -> None:
        replayed = State()
        for is_decision, batch in self.batches:
            if is_decision:
                assert decide(replayed) == batch, "re-running the pass differs from the record"
            for event in batch:
                fold(replayed, ev.decode(ev.encode(event)))
        same_state(replayed, self.w.state, "replaying the log")
        restored, position = restore(take(self.w.state, seq=len(self.batches)))
        assert position == len(self.batches)
        same_state(restored, self.w.state, "restoring a snapshot")
        check_allocation(restored)
        assert decide(restored) == decide(self.w.state)


def whole(state: State) -> Any:
    """Everything a State holds, entities and every index, as plain values."""

    def plain(value: Any) -> Any:
        if isinstance(value, SortedList | set):
            return sorted(value)
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in sorted(value.items(), key=str) if plain(v)}
        return msgspec.to_builtins(value)

    return {name: plain(value) for name, value in vars(state).items()}


def check_every_waiting_job_has_a_reason(state: State) -> None:
    """After a settled pass every RUNNABLE job says why it waits, and none is merely
    waiting for a pass (that would be a job the pass should have placed)."""
    explain = Explainer(state)
    for job in state.jobs.values():
        if job.status is JobStatus.RUNNABLE and not job.awaiting_outcome:
            reason = explain.why(job.job_id)
            assert reason is not None and reason.message, f"{job.job_id} waits without a reason"
            assert reason.code is not WaitCode.AWAITING_PASS, f"{job.job_id}: {reason.message}"


def same_state(got: State, want: State, how: str) -> None:
    """Compare entity by entity so a failure names what differs (not a byte diff)."""
    if snapshot(got) == snapshot(want):
        return
    for kind in ("jobs", "hosts", "pools"):
        mine, theirs = getattr(got, kind), getattr(want, kind)
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                raise AssertionError(
                    f"{how}: {kind}[{key}] differs:\n{mine.get(key)}\n{theirs.get(key)}"
                )
    raise AssertionError(f"{how}: usage indexes differ")


TestSchedulerHistory = SchedulerHistory.TestCase
TestSchedulerHistory.settings = settings(
    max_examples=int(os.environ.get("QM_PROPERTY_EXAMPLES", "80")),
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
