"""Property-based tests: random histories keep every invariant of spec section 4.

After every step the pass is run to its fixpoint and the invariants are
checked; at the end the whole log is replayed from scratch and must rebuild
the same state, with the pass deciding exactly what was recorded.
"""

from __future__ import annotations

import os

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from quartermaster import events as ev
from quartermaster.core import State, decide, fold
from quartermaster.core.model import JobStatus
from quartermaster.core.snapshot import restore, take
from quartermaster.testing.builders import World, a_job
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
            for d in decisions:
                if isinstance(d, ev.JobPreemptionRequested):
                    self._check_preemption(d)
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

    def _check_preemption(self, d: ev.JobPreemptionRequested) -> None:
        victim, target = self.w.job(d.job_id), self.w.job(d.for_job)
        assert target.status is JobStatus.RUNNABLE, "preempted for a job that is not waiting"
        if victim.share == target.share:
            share = self.w.state.shares[("q", victim.share)]
            assert share.in_share_preemption is ev.State.ENABLED
            assert victim.priority < target.priority, "in-share victim not of lower priority"

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
        before = len(self.w.log)
        self.w.submit(spec)
        self.batches.append((False, self.w.log[before:]))
        self._settle()

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
