"""A job's life: retries, infrastructure failures, host loss, timeouts, termination,
multi-instance placement, misconfiguration and disabled environments.

Spec: semantics.md section 2 (service jobs) and section 1 (environments, queues).
"""

from __future__ import annotations

import pytest

from quartermaster import events as ev
from quartermaster.core.decide import PassPolicy, decide
from quartermaster.core.model import JobStatus
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"
CAPACITY = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
ENV_MAX = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
SHARE_MAX = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
E = ev.EvaluateOnExit


def world(hosts: int = 1, limit: int | None = None, strategy: str = "RESERVE") -> World:
    w = World().environment(ml_g5_xlarge=hosts).queue().hosts(hosts)
    w.share("QS1", hosts if limit is None else limit, strategy)
    return w


def report(w: World, job_id: str, event: type[ev.Event]) -> None:
    """Every host of the live attempt reports `event` (JobStarting, JobRunning)."""
    job = w.job(job_id)
    for host in job.hosts:
        w.apply(event(at=w.clock, job_id=job_id, attempt=job.attempt_no, host=host))  # type: ignore[call-arg]


def bring_to(w: World, job_id: str, status: JobStatus) -> None:
    """Move a freshly dispatched job on to SCHEDULED, STARTING or RUNNING."""
    assert w.status(job_id) is JobStatus.SCHEDULED
    if status in (JobStatus.STARTING, JobStatus.RUNNING):
        report(w, job_id, ev.JobStarting)
    if status is JobStatus.RUNNING:
        report(w, job_id, ev.JobRunning)
    assert w.status(job_id) is status


def decided(w: World, kind: type[ev.Event], job_id: str) -> bool:
    return any(isinstance(d, kind) and d.job_id == job_id for d in w.decisions)  # type: ignore[attr-defined]


# ---- retry strategy ------------------------------------------------------------------


@pytest.mark.parametrize("attempts", [1, 2, 3, 10])
def test_attempts_counts_every_runnable_transition_including_the_first(attempts: int) -> None:
    # given: a job that fails every time
    w = world()
    j = w.submit(a_job(name="j", attempts=attempts))
    w.pass_()
    # when: each attempt fails
    for n in range(1, attempts + 1):
        assert w.status(j) is JobStatus.SCHEDULED, f"attempt {n} should run"
        assert w.job(j).attempts_used == n
        w.start(j).fail(j)
        w.pass_()
    # then: `attempts` attempts ran in all, the last failure is final
    job = w.job(j)
    assert job.status is JobStatus.FAILED
    assert len(job.attempts) == attempts
    assert not job.is_terminated
    assert job.status_reason == "AlgorithmError: exit 1"
    assert w.state.hosts["h1"].holder is None


@pytest.mark.parametrize(
    ("rules", "reason", "exit_code", "retried"),
    [
        pytest.param((), "AlgorithmError: boom", 1, True, id="no-rules-retry"),
        pytest.param(
            (E("EXIT", on_status_reason="AlgorithmError*"),),
            "AlgorithmError: boom",
            1,
            False,
            id="reason-glob-exit",
        ),
        pytest.param(
            (E("EXIT", on_status_reason="OutOfMemory*"),),
            "AlgorithmError: boom",
            1,
            True,
            id="no-match-retry",
        ),
        pytest.param(
            (E("EXIT", on_status_reason="*boom"),), "AlgorithmError: boom", 1, False, id="suffix"
        ),
        pytest.param((E("EXIT", on_exit_code="137"),), "killed", 137, False, id="exit-code-exit"),
        pytest.param((E("EXIT", on_exit_code="137"),), "killed", 1, True, id="exit-code-other"),
        pytest.param((E("EXIT", on_exit_code="13*"),), "x", 139, False, id="exit-code-glob"),
        pytest.param(
            (E("RETRY", on_exit_code="1"), E("EXIT", on_status_reason="*")),
            "x",
            1,
            True,
            id="first-match-wins-retry",
        ),
        pytest.param(
            (E("RETRY", on_exit_code="1"), E("EXIT", on_status_reason="*")),
            "x",
            2,
            False,
            id="falls-through-to-exit",
        ),
        pytest.param(
            (E("EXIT", on_status_reason="Algo*", on_exit_code="2"),),
            "AlgorithmError",
            1,
            True,
            id="all-conditions-must-match",
        ),
        pytest.param((E("RETRY", on_status_reason="*"),), "x", 1, True, id="retry-everything"),
    ],
)
def test_evaluate_on_exit_globs_decide_retry_or_exit(
    rules: tuple[ev.EvaluateOnExit, ...], reason: str, exit_code: int, retried: bool
) -> None:
    # given: a job with attempts to spare and `evaluateOnExit` rules
    w = world()
    j = w.submit(a_job(name="j", attempts=3, evaluate_on_exit=rules))
    w.pass_()
    # when: the first attempt fails with `reason` and `exit_code`
    w.start(j).fail(j, reason=reason, exit_code=exit_code)
    w.pass_()
    # then
    job = w.job(j)
    if retried:
        assert decided(w, ev.JobRetried, j)
        assert job.attempts_used == 2
        assert job.status is JobStatus.SCHEDULED  # RUNNABLE again, then dispatched
    else:
        assert decided(w, ev.JobFinallyFailed, j)
        assert job.status is JobStatus.FAILED
        assert job.status_reason == reason
        assert len(job.attempts) == 1


def test_a_matching_retry_rule_cannot_exceed_attempts() -> None:
    # given: one attempt only, and a rule that says RETRY
    w = world()
    j = w.submit(a_job(name="j", attempts=1, evaluate_on_exit=(E("RETRY", on_status_reason="*"),)))
    w.pass_()
    # when
    w.start(j).fail(j)
    w.pass_()
    # then
    assert w.status(j) is JobStatus.FAILED


def test_the_retry_reason_is_the_failed_attempt_reason() -> None:
    # given: one host; the retried job will wait behind a higher-priority job
    w = world(1)
    j = w.submit(a_job(name="j", attempts=2))
    w.pass_()
    w.start(j).fail(j, reason="AlgorithmError: CUDA out of memory")
    # when: the outcome is decided, and the job waits behind a higher-priority job
    w.submit(a_job(name="blocker", priority=9))
    w.pass_()
    # then
    job = w.job(j)
    assert job.status is JobStatus.RUNNABLE
    assert job.status_reason == "AlgorithmError: CUDA out of memory"
    assert job.attempts[0].status_reason == "AlgorithmError: CUDA out of memory"
    assert job.attempts[0].exit_code == 1


# ---- infrastructure failures and lost hosts ----------------------------------------------


@pytest.mark.parametrize("status", [JobStatus.SCHEDULED, JobStatus.STARTING])
def test_infrastructure_failure_before_running_requeues_with_capacity_reason(
    status: JobStatus,
) -> None:
    # given: a job with a single attempt, dispatched
    w = world(2)
    j = w.submit(a_job(name="j", attempts=1))
    w.pass_()
    bring_to(w, j, status)
    # when: the node agent fails it with an infrastructure error
    w.fail(
        j,
        reason="could not pull image: registry unreachable",
        failure_class=ev.FailureClass.INFRASTRUCTURE_ERROR,
        exit_code=None,
    )
    # then: RUNNABLE again, with a capacity reason, and no attempt used
    job = w.job(j)
    assert job.status is JobStatus.RUNNABLE
    assert job.status_reason.startswith(f"{CAPACITY} - ")
    assert job.attempts_used == 1
    # and its only attempt is still to come: it runs, and a real failure ends it
    w.pass_()
    assert j in w.dispatched()
    w.start(j).fail(j)
    w.pass_()
    assert w.status(j) is JobStatus.FAILED
    assert len(w.job(j).attempts) == 2


@pytest.mark.parametrize("status", [JobStatus.SCHEDULED, JobStatus.STARTING])
def test_host_lost_before_running_requeues_with_capacity_reason(status: JobStatus) -> None:
    # given: 2 hosts; the job is dispatched on h1
    w = world(2)
    j = w.submit(a_job(name="j", attempts=1))
    w.pass_()
    assert w.dispatched() == {j: ("h1",)}
    bring_to(w, j, status)
    # when: h1 is lost
    w.lose_host("h1")
    # then
    job = w.job(j)
    assert job.status is JobStatus.RUNNABLE
    assert job.status_reason.startswith(CAPACITY)
    assert job.attempts_used == 1
    assert job.attempts[-1].stopped_at is not None
    # and the next pass places it on the healthy host
    w.pass_()
    assert w.dispatched() == {j: ("h2",)}


def test_host_lost_while_running_uses_no_attempt() -> None:
    w = world(2)
    j = w.submit(a_job(name="j", attempts=1))
    w.pass_()
    w.start(j)
    # when
    w.lose_host("h1")
    # then: an infrastructure loss, not a failure of the job
    assert w.status(j) is JobStatus.RUNNABLE
    assert w.job(j).attempts_used == 1
    w.pass_()
    assert w.dispatched() == {j: ("h2",)}


def test_a_lost_host_of_a_multi_host_job_releases_all_its_hosts() -> None:
    # given: 3 hosts; a 2-instance job on h1 and h2
    w = world(3)
    j = w.submit(a_job(name="pair", count=2))
    w.pass_()
    assert w.dispatched() == {j: ("h1", "h2")}
    # when: h1 is lost, and the other host's part is stopped
    w.lose_host("h1")
    w.confirm_stop(j)
    # then: the job waits again and holds no host
    job = w.job(j)
    assert job.status is JobStatus.RUNNABLE
    assert job.status_reason.startswith(CAPACITY)
    assert job.hosts == ()
    assert all(h.holder is None for h in w.state.hosts.values())
    assert w.state.use[("q", "QS1", UNIT)] == 0
    # and it is placed again, all at once, on healthy hosts
    w.pass_()
    assert w.dispatched() == {j: ("h2", "h3")}


# ---- timeouts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempts", "final_status"),
    [
        pytest.param(1, JobStatus.FAILED, id="no-retry-left-fails"),
        pytest.param(2, JobStatus.SCHEDULED, id="retried"),
    ],
)
def test_a_timed_out_attempt_is_stopped_and_fails(attempts: int, final_status: JobStatus) -> None:
    # given: a 60 s attempt timeout; the job waits 100 s before it starts running
    w = world()
    j = w.submit(a_job(name="j", timeout=60, attempts=attempts))
    w.pass_()
    w.tick(100)
    w.start(j)
    # when: 59 s of running
    w.tick(59)
    w.pass_()
    # then: nothing yet (the clock starts when the attempt runs)
    assert not decided(w, ev.JobTimedOut, j)
    # when: past the timeout
    w.tick(2)
    w.pass_()
    # then: the attempt is asked to stop and keeps its host until the stop is confirmed
    assert decided(w, ev.JobTimedOut, j)
    assert w.status(j) is JobStatus.RUNNING
    assert w.state.hosts["h1"].holder == j
    w.tick(30)
    assert w.pass_() == []  # asked once
    # when: the stop is confirmed
    w.confirm_stop(j)
    w.pass_()
    # then
    job = w.job(j)
    assert job.status is final_status
    assert "timeout" in job.attempts[0].status_reason
    if final_status is JobStatus.FAILED:
        assert "timeout" in job.status_reason
        assert w.state.hosts["h1"].holder is None


def test_the_payload_max_runtime_times_out_like_attempt_duration() -> None:
    # given: MaxRuntimeInSeconds 30 is shorter than attemptDurationSeconds 600
    w = world()
    w.apply(
        ev.JobSubmitted(
            at=w.clock,
            job_id="j",
            job_name="j",
            job_queue="q",
            quota_share="QS1",
            instance_type=UNIT,
            attempt_duration_seconds=600,
            max_runtime_seconds=30,
        )
    )
    w.pass_()
    w.start("j")
    # when
    w.tick(31)
    w.pass_()
    # then
    assert decided(w, ev.JobTimedOut, "j")


# ---- termination -----------------------------------------------------------------------


def test_terminating_a_runnable_job_fails_it_at_once() -> None:
    # given: the only host is busy; j waits
    w = world()
    busy = w.submit(a_job(name="busy"))
    j = w.submit(a_job(name="j", attempts=3))
    w.pass_()
    w.start(busy)
    assert w.status(j) is JobStatus.RUNNABLE
    # when
    w.terminate(j, "no longer needed")
    # then
    job = w.job(j)
    assert job.status is JobStatus.FAILED
    assert job.status_reason == "no longer needed"
    assert job.is_terminated
    # and it never runs, even when the host frees up
    w.succeed(busy)
    w.pass_()
    assert w.dispatched() == {}
    assert w.status(j) is JobStatus.FAILED


@pytest.mark.parametrize("status", [JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING])
def test_terminating_an_active_job_fails_it_at_once_but_holds_its_host_until_stopped(
    status: JobStatus,
) -> None:
    # given: j holds the only host; next waits
    w = world()
    j = w.submit(a_job(name="j", attempts=3))
    w.pass_()
    bring_to(w, j, status)
    nxt = w.submit(a_job(name="next"))
    # when
    w.terminate(j, "user cancelled")
    w.pass_()
    # then: FAILED and terminated at once, the host still held
    job = w.job(j)
    assert job.status is JobStatus.FAILED
    assert job.is_terminated
    assert job.status_reason == "user cancelled"
    assert w.state.hosts["h1"].holder == j
    assert w.dispatched() == {}
    # when: the node agent confirms the stop
    w.confirm_stop(j)
    w.pass_()
    # then: the host goes to the next job; j stays FAILED (no retry)
    assert w.dispatched() == {nxt: ("h1",)}
    assert w.status(j) is JobStatus.FAILED
    assert w.job(j).attempts[-1].status_reason == "user cancelled"


def test_terminating_a_job_whose_attempt_just_failed_does_not_leak_its_hosts() -> None:
    # given: a keep-alive job with retries left; its attempt has failed, the pass not yet run
    w = world()
    j = w.submit(a_job(name="j", attempts=3, keep_alive=600))
    w.pass_()
    w.start(j).fail(j)
    # when: the user terminates it before the retry is decided
    w.terminate(j, "user cancelled")
    w.pass_()
    w.confirm_all_stops()
    w.pass_()
    # then: the job is over, and its host is free or kept as an Available pool
    assert w.status(j) is JobStatus.FAILED
    pool = w.state.pools.get(j)
    assert pool is not None or w.state.hosts["h1"].holder is None
    nxt = w.submit(a_job(name="next"))
    w.pass_()
    assert nxt in w.dispatched()


# ---- multi-instance jobs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hosts", "count", "dispatched"),
    [
        pytest.param(1, 2, (), id="1-host-2-needed-none"),
        pytest.param(2, 2, ("h1", "h2"), id="exact-fit"),
        pytest.param(3, 2, ("h1", "h2"), id="lowest-ids"),
        pytest.param(2, 3, (), id="2-hosts-3-needed-none"),
        pytest.param(4, 4, ("h1", "h2", "h3", "h4"), id="four"),
    ],
)
def test_multi_instance_jobs_take_all_their_hosts_at_once_or_none(
    hosts: int, count: int, dispatched: tuple[str, ...]
) -> None:
    # given: maxCapacity 4 (so the job is no misconfiguration), `hosts` registered
    w = World().environment(ml_g5_xlarge=4).queue().hosts(hosts)
    w.share("QS1", 4, "RESERVE")
    j = w.submit(a_job(name="j", count=count))
    # when
    w.pass_()
    # then
    assert w.dispatched() == ({j: dispatched} if dispatched else {})
    held = sorted(h.host_id for h in w.state.hosts.values() if h.holder == j)
    assert tuple(held) == dispatched
    assert w.state.use[("q", "QS1", UNIT)] == len(dispatched)


def test_a_waiting_multi_instance_job_starts_when_enough_hosts_register() -> None:
    # given: a 2-instance job and one host
    w = World().environment(ml_g5_xlarge=4).queue().hosts(1)
    w.share("QS1", 4, "RESERVE")
    j = w.submit(a_job(name="j", count=2))
    w.pass_()
    assert w.status(j) is JobStatus.RUNNABLE
    assert w.state.hosts["h1"].holder is None  # not half-placed
    # when: a second host registers
    w.hosts(1, prefix="x")
    w.pass_()
    # then
    assert w.dispatched() == {j: ("h1", "x1")}


def test_a_multi_instance_job_gives_back_its_hosts_only_when_every_host_ended() -> None:
    w = world(2)
    j = w.submit(a_job(name="j", count=2))
    w.pass_()
    w.start(j)
    nxt = w.submit(a_job(name="next"))
    # when: one host reports success
    w.apply(ev.JobSucceeded(at=w.clock, job_id=j, attempt=w.job(j).attempt_no, host="h1"))
    w.pass_()
    # then: both hosts stay held
    assert w.status(j) is JobStatus.RUNNING
    assert w.dispatched() == {}
    # when: the second host reports success
    w.succeed(j)
    w.pass_()
    # then
    assert w.status(j) is JobStatus.SUCCEEDED
    assert w.dispatched() == {nxt: ("h1",)}


# ---- misconfiguration ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env_max", "shares", "count", "reason"),
    [
        pytest.param(2, [("QS1", 2, "RESERVE", -1)], 3, ENV_MAX, id="over-env-max"),
        pytest.param(4, [("QS1", 4, "LEND_AND_BORROW", -1)], 5, ENV_MAX, id="over-env-max-for-LAB"),
        pytest.param(4, [("QS1", 1, "RESERVE", -1)], 2, SHARE_MAX, id="RESERVE-own-limit"),
        pytest.param(4, [("QS1", 1, "LEND", -1)], 2, SHARE_MAX, id="LEND-own-limit"),
        pytest.param(4, [("QS1", 1, "LEND_AND_BORROW", 0)], 2, SHARE_MAX, id="LAB-borrowLimit-0"),
        pytest.param(
            4, [("QS1", 1, "LEND_AND_BORROW", 100)], 3, SHARE_MAX, id="LAB-borrowLimit-100"
        ),
        pytest.param(
            4,
            [("QS1", 1, "LEND_AND_BORROW", -1), ("QS2", 3, "RESERVE", -1)],
            2,
            SHARE_MAX,
            id="LAB-nothing-lendable",
        ),
        pytest.param(
            4,
            [("QS1", 1, "LEND_AND_BORROW", -1), ("QS2", 1, "RESERVE", -1), ("QS3", 1, "LEND", -1)],
            4,
            SHARE_MAX,
            id="LAB-own+lendable+unassigned=3",
        ),
    ],
)
def test_a_job_that_can_never_fit_gets_a_misconfiguration_reason_and_blocks_nothing(
    env_max: int, shares: list[tuple[str, int, str, int]], count: int, reason: str
) -> None:
    # given
    w = World().environment(ml_g5_xlarge=env_max).queue().hosts(env_max)
    for name, limit, strategy, borrow_limit in shares:
        w.share(name, limit, strategy, borrow_limit=borrow_limit)
    # when: the misfit is the share's head, a fitting job is behind it
    bad = w.submit(a_job(name="bad", count=count, priority=9))
    good = w.submit(a_job(name="good"))
    w.pass_()
    # then
    assert w.status(bad) is JobStatus.RUNNABLE
    assert w.job(bad).status_reason.startswith(f"{reason} - ")
    assert good in w.dispatched()
    # and the reason is set once, not on every pass
    assert w.pass_() == []


@pytest.mark.parametrize(
    ("shares", "count"),
    [
        pytest.param([("QS1", 1, "LEND_AND_BORROW", 100)], 2, id="LAB-borrowLimit-100"),
        pytest.param([("QS1", 1, "LEND_AND_BORROW", -1)], 4, id="LAB-unassigned"),
        pytest.param(
            [("QS1", 1, "LEND_AND_BORROW", -1), ("QS2", 3, "LEND", -1)], 4, id="LAB-lendable"
        ),
        pytest.param([("QS1", 4, "RESERVE", -1)], 4, id="RESERVE-own"),
    ],
)
def test_a_job_that_could_fit_some_day_is_no_misconfiguration(
    shares: list[tuple[str, int, str, int]], count: int
) -> None:
    w = World().environment(ml_g5_xlarge=4).queue().hosts(4)
    for name, limit, strategy, borrow_limit in shares:
        w.share(name, limit, strategy, borrow_limit=borrow_limit)
    j = w.submit(a_job(name="j", count=count))
    w.pass_()
    assert j in w.dispatched()
    assert not w.job(j).status_reason.startswith("MISCONFIGURATION")


# ---- disabled environments and queues ---------------------------------------------------


def set_environment(w: World, state: ev.State, capacity: int = 2) -> None:
    w.apply(
        ev.ServiceEnvironmentUpdated(
            at=w.clock,
            name="env",
            capacity_limits=(ev.CapacityLimit(UNIT, capacity),),
            state=state,
        )
    )


def test_a_disabled_service_environment_dispatches_nothing() -> None:
    # given: a disabled environment with free hosts and a waiting job
    w = world(2)
    set_environment(w, ev.State.DISABLED)
    j = w.submit(a_job(name="j"))
    # when
    decisions = w.pass_()
    # then
    assert decisions == []
    assert w.status(j) is JobStatus.RUNNABLE
    # when: it is enabled again
    set_environment(w, ev.State.ENABLED)
    w.pass_()
    # then
    assert j in w.dispatched()


def test_disabling_an_environment_leaves_running_jobs_alone() -> None:
    w = world(2)
    running = w.submit(a_job(name="running"))
    w.pass_()
    w.start(running)
    # when
    set_environment(w, ev.State.DISABLED)
    w.pass_()
    # then
    assert w.preempted() == []
    assert w.status(running) is JobStatus.RUNNING
    w.succeed(running)
    assert w.status(running) is JobStatus.SUCCEEDED


def test_a_disabled_job_queue_still_runs_its_queued_jobs() -> None:
    # given: one host busy, one job queued behind it
    w = world(1)
    first = w.submit(a_job(name="first"))
    queued = w.submit(a_job(name="queued"))
    w.pass_()
    w.start(first)
    # when: the queue is disabled, and the running job ends
    w.apply(
        ev.JobQueueUpdated(at=w.clock, name="q", state=ev.State.DISABLED, scheduling_policy="fifo")
    )
    w.succeed(first)
    w.pass_()
    # then: "DISABLED: no new submissions, running and queued jobs go on"
    assert w.dispatched() == {queued: ("h1",)}


def test_a_scheduler_times_out_only_the_attempts_of_queues_it_leads() -> None:
    # given: a running attempt past its 60 s timeout in queue q
    w = world()
    j = w.submit(a_job(name="j", timeout=60))
    w.pass_()
    w.start(j)
    w.tick(61)
    # when: a scheduler leading only another queue runs its pass
    others = decide(w.state, w.policy, queues=frozenset({"other"}), hosts=False)
    # then: the timeout is left to q's leader, which decides it
    assert [e for e in others if isinstance(e, ev.JobTimedOut)] == []
    mine = decide(w.state, w.policy, queues=frozenset({"q"}), hosts=False)
    assert [e.job_id for e in mine if isinstance(e, ev.JobTimedOut)] == [j]


def test_a_heartbeat_stored_late_does_not_make_a_host_lost_again() -> None:
    # given: a 15 s heartbeat timeout; host h1 re-registers after a network cut, and a
    # heartbeat it sent during the cut (older than the registration) is stored afterwards
    w = world()
    w.policy = PassPolicy(heartbeat_timeout_seconds=15.0)
    w.tick(100)
    registered_at = w.clock
    w.apply(ev.HostRegistered(at=registered_at, host_id="h1", instance_type=UNIT, gpu_count=1))
    w.apply(ev.HostHeartbeat(at=registered_at - 20, host_id="h1"))
    # when: 10 s pass, less than the timeout since the registration
    w.tick(10)
    # then: the host is not judged lost on the stale heartbeat
    assert not [e for e in w.pass_() if isinstance(e, ev.HostLost)]
    # and silence past the timeout still is
    w.tick(6)
    assert [e.host_id for e in w.pass_() if isinstance(e, ev.HostLost)] == ["h1"]
