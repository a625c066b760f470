"""The incremental pass decides exactly what the full pass decides, on random histories.

Three queues share one environment and its hosts (so one queue's change moves
what the others see); after every input the pass runs to its fixpoint, each
round asked twice, with the memo and without, and the answers must be equal.
A scheduler leading only some queues keeps its own memo: it is checked too.
So is a state folded from the same log that forgets ended jobs after 30 s
(`core.retention`): it must decide the same.
"""

from __future__ import annotations

import os

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, rule

from quartermaster import events as ev
from quartermaster.core import State, decide, fold
from quartermaster.core.incremental import PassMemo
from quartermaster.core.model import JobStatus
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"
QUEUES = ["qa", "qb", "qc"]
SHARES = [("A", "LEND_AND_BORROW", 100, True), ("B", "LEND", -1, False), ("C", "RESERVE", -1, True)]
HOSTS = 4


class IncrementalHistory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.w = World()
        self.w.environment(ml_g5_xlarge=HOSTS)
        for queue in QUEUES:
            self.w.queue(queue)
            for name, strategy, borrow, preemption in SHARES:
                self.w.share(
                    name, 1, strategy, borrow_limit=borrow, preemption=preemption, queue=queue
                )
        self.w.hosts(HOSTS)
        self.memo = PassMemo()
        self.led = frozenset(QUEUES[:2])
        self.led_memo = PassMemo()
        self.n = 0
        self.rounds = 0
        self.forgetful = State()
        self.forgetful.retention_seconds = 30.0
        self.fed = 0

    def _settle(self) -> None:
        for _ in range(64):
            full = decide(self.w.state)
            assert decide(self.w.state, memo=self.memo) == full, "incremental != full"
            led = decide(self.w.state, queues=self.led)
            assert decide(self.w.state, queues=self.led, memo=self.led_memo) == led
            for event in self.w.log[self.fed :]:
                fold(self.forgetful, event)
            self.fed = len(self.w.log)
            assert decide(self.forgetful) == full, "retention changed a decision"
            self.rounds += 1
            if not full:
                return
            for decision in full:
                self.w.apply(decision)
        raise AssertionError("the pass did not settle")

    def _live(self, *statuses: JobStatus) -> list[str]:
        return sorted(j.job_id for j in self.w.state.jobs.values() if j.status in statuses)

    @rule(
        queue=st.sampled_from(QUEUES),
        share=st.sampled_from([s[0] for s in SHARES]),
        priority=st.integers(0, 3),
        count=st.sampled_from([1, 1, 2, 7]),
        keep_alive=st.sampled_from([0, 0, 60]),
        jobs=st.integers(1, 3),
    )
    def submit(
        self, queue: str, share: str, priority: int, count: int, keep_alive: int, jobs: int
    ) -> None:
        for _ in range(jobs):
            self.n += 1
            self.w.submit(
                a_job(
                    name=f"j{self.n}",
                    queue=queue,
                    share=share,
                    priority=priority,
                    count=count,
                    keep_alive=keep_alive,
                )
            )
        self._settle()

    @rule(data=st.data(), priority=st.integers(0, 3))
    def reprioritise(self, data: st.DataObject, priority: int) -> None:
        live = self._live(JobStatus.RUNNABLE, JobStatus.SCHEDULED, JobStatus.RUNNING)
        if live:
            job_id = data.draw(st.sampled_from(live))
            self.w.set_priority(job_id, priority)
            self._settle()

    @rule(data=st.data())
    def start(self, data: st.DataObject) -> None:
        live = [j for j in self._live(JobStatus.SCHEDULED) if self.w.job(j).stop_cause is None]
        if live:
            self.w.start(data.draw(st.sampled_from(live)))
            self._settle()

    @rule(data=st.data(), ok=st.booleans())
    def finish(self, data: st.DataObject, ok: bool) -> None:
        live = [
            j
            for j in self._live(JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING)
            if not self.w.job(j).ended_hosts and not self.w.job(j).awaiting_outcome
        ]
        if live:
            job_id = data.draw(st.sampled_from(live))
            if ok:
                self.w.succeed(job_id)
            else:
                self.w.fail(job_id)
            self._settle()

    @rule()
    def confirm_stops(self) -> None:
        self.w.confirm_all_stops()
        self._settle()

    @rule(data=st.data())
    def terminate(self, data: st.DataObject) -> None:
        live = self._live(JobStatus.RUNNABLE, JobStatus.SCHEDULED, JobStatus.RUNNING)
        if live:
            self.w.terminate(data.draw(st.sampled_from(live)))
            self._settle()

    @rule(host=st.integers(1, HOSTS), how=st.sampled_from(["lost", "drained", "back"]))
    def host_changes(self, host: int, how: str) -> None:
        host_id = f"h{host}"
        if how == "lost":
            self.w.apply(ev.HostLost(at=self.w.clock, host_id=host_id))
        elif how == "drained":
            self.w.apply(ev.HostDrained(at=self.w.clock, host_id=host_id))
        else:
            h = self.w.state.hosts[host_id]
            if h.status.value == "HEALTHY" or h.holder is not None:
                return
            self.w.apply(ev.HostRegistered(at=self.w.clock, host_id=host_id, instance_type=UNIT))
        self._settle()

    @rule(queue=st.sampled_from(QUEUES), share=st.integers(0, 2), limit=st.integers(0, 3))
    def change_limit(self, queue: str, share: int, limit: int) -> None:
        name, strategy, borrow, preemption = SHARES[share]
        self.w.share(
            name,
            limit,
            strategy,
            borrow_limit=borrow,
            preemption=preemption,
            queue=queue,
            updated=True,
        )
        self._settle()

    @rule(queue=st.sampled_from(QUEUES), enabled=st.booleans())
    def toggle_queue(self, queue: str, enabled: bool) -> None:
        self.w.apply(
            ev.JobQueueUpdated(
                at=self.w.clock,
                name=queue,
                scheduling_policy="fifo",
                state=ev.State.ENABLED if enabled else ev.State.DISABLED,
            )
        )
        self._settle()

    @rule(capacity=st.integers(2, HOSTS + 2))
    def change_environment(self, capacity: int) -> None:
        self.w.apply(
            ev.ServiceEnvironmentUpdated(
                at=self.w.clock, name="env", capacity_limits=(ev.CapacityLimit(UNIT, capacity),)
            )
        )
        self._settle()

    @rule(data=st.data(), keep_alive=st.sampled_from([0, 30]))
    def keep_alive(self, data: st.DataObject, keep_alive: int) -> None:
        pools = sorted(self.w.state.pools)
        if pools:
            self.w.apply(
                ev.WarmPoolKeepAliveUpdated(
                    at=self.w.clock,
                    job_id=data.draw(st.sampled_from(pools)),
                    keep_alive_seconds=keep_alive,
                    pass_decides_expiry=True,
                )
            )
            self._settle()

    @rule(seconds=st.sampled_from([1, 30, 61, 3600]))
    def tick(self, seconds: int) -> None:
        self.w.tick(seconds)
        self._settle()

    def teardown(self) -> None:
        if self.rounds:
            assert self.memo.run + self.memo.skipped > 0
        kept = set(self.forgetful.jobs)
        assert kept <= set(self.w.state.jobs)
        for job_id in set(self.w.state.jobs) - kept:  # only jobs long ended were forgotten
            job = self.w.state.jobs[job_id]
            assert job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED) and not job.hosts
            assert job.stopped_at is not None and job.stopped_at <= self.w.clock - 30


TestIncrementalHistory = IncrementalHistory.TestCase
TestIncrementalHistory.settings = settings(
    max_examples=int(os.environ.get("QM_PROPERTY_EXAMPLES", "80")),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_quiet_queue_is_skipped_and_a_changed_one_is_run() -> None:
    """The memo does skip: after one settled pass, a submit to one queue runs only it."""
    w = World()
    w.environment(ml_g5_xlarge=2)
    for queue in QUEUES:
        w.queue(queue)
        w.share("A", 1, queue=queue)
    w.hosts(2)
    for queue in QUEUES:
        w.submit(a_job(name=f"first-{queue}", queue=queue, share="A"))
    memo = PassMemo()
    while decisions := decide(w.state, memo=memo):
        for decision in decisions:
            fold(w.state, decision)
    run_before = memo.run
    w.submit(a_job(name="later", queue="qb", share="A"))
    assert decide(w.state, memo=memo) == decide(w.state) == []
    assert memo.run - run_before == 1


def _two_queues_one_stopping() -> tuple[World, PassMemo]:
    """qb holds 3 of 4 hosts, one of them stopping; its head (2 units) waits for that
    stop while one host is free. The memo has seen qb quiet with that free host."""
    w = World()
    w.environment(ml_g5_xlarge=4)
    w.queue("qa")
    w.share("A", 1, queue="qa")
    w.queue("qb")
    w.share("B", 4, preemption=True, queue="qb")
    w.hosts(4)
    for n in range(3):
        w.submit(a_job(name=f"b{n}", queue="qb", share="B"))
    w.pass_()
    w.terminate("b0")  # its host is promised back: a stop pending
    memo = PassMemo()
    w.submit(a_job(name="head", queue="qb", share="B", count=2, priority=5))
    assert decide(w.state, memo=memo) == decide(w.state) == []  # it waits for b0's stop
    return w, memo


def test_a_queue_waiting_for_a_stop_runs_again_with_fewer_free_hosts() -> None:
    """qa takes the free host: qb's head no longer fits once b0 stops, so the same pass
    preempts for it. The memo must not take qb's quiet pass with more free hosts for it."""
    w, memo = _two_queues_one_stopping()
    w.submit(a_job(name="x", queue="qa", share="A"))
    full = decide(w.state)
    assert [type(d).__name__ for d in full].count("JobPreemptionRequested") == 2
    assert decide(w.state, memo=memo) == full


def test_a_quiet_queue_with_nothing_stopping_skips_with_fewer_free_hosts() -> None:
    """Seven queues wait on a full environment; a finished job frees one host and the
    first queue takes it. The queues after it saw one free host before and decided
    nothing: with none free they decide nothing again, and are skipped."""
    queues = [f"q{i}" for i in range(7)]
    w = World()
    w.environment(ml_g5_xlarge=len(queues))
    for queue in queues:
        w.queue(queue)
        w.share("A", 1, "LEND", queue=queue)  # no borrowing: a queue takes its own host
    w.hosts(len(queues))
    for queue in queues:
        for n in range(3):
            w.submit(a_job(name=f"{queue}-{n}", queue=queue, share="A"))
    memo = PassMemo()
    while decisions := decide(w.state, memo=memo):
        for decision in decisions:
            fold(w.state, decision)
    w.succeed("q6-0")  # the last queue's host comes free: every queue sees it
    while decisions := decide(w.state, memo=memo):
        assert decisions == decide(w.state)
        for decision in decisions:
            fold(w.state, decision)
    w.succeed("q0-0")  # now the first queue takes it: the others see no free host
    run_before = memo.run
    decisions = decide(w.state, memo=memo)
    assert decisions == decide(w.state)
    assert [d.job_id for d in decisions if isinstance(d, ev.JobDispatched)] == ["q0-1"]
    assert len(decisions) == 1
    # q0, which takes it, and q6, whose own inputs changed when it took the first host:
    # q1..q5 were quiet with one free host.
    assert memo.run - run_before == 2
