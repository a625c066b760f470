"""A host's view holds its own entry and the jobs live on it, and nothing of other hosts."""

from __future__ import annotations

from qm_node_agent import desired
from quartermaster import events as ev
from quartermaster.core import JobStatus, State, fold
from quartermaster.eventlog.host_feed import as_state, decode_view, encode_view, touched, view_of

UNIT = "ml.g5.xlarge"


def a_platform(*hosts: str) -> State:
    state = State()
    limits = (ev.CapacityLimit(UNIT, 8),)
    for event in [
        ev.ServiceEnvironmentCreated(at=1.0, name="env", capacity_limits=limits),
        ev.SchedulingPolicyCreated(at=1.0, name="fifo"),
        ev.JobQueueCreated(at=1.0, name="q", service_environment="env", scheduling_policy="fifo"),
        ev.QuotaShareCreated(
            at=1.0,
            job_queue="q",
            name="QS1",
            capacity_limits=limits,
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
        ),
        *[ev.HostRegistered(at=1.0, host_id=h, instance_type=UNIT) for h in hosts],
    ]:
        fold(state, event)
    return state


def submitted(job_id: str) -> ev.JobSubmitted:
    return ev.JobSubmitted(
        at=2.0,
        job_id=job_id,
        job_name=job_id,
        job_queue="q",
        quota_share="QS1",
        instance_type=UNIT,
        warm_pool_key=ev.WarmPoolKey(instance_type=UNIT),
        payload="{}",
    )


def test_a_dispatched_job_is_in_its_hosts_view_only() -> None:
    state = a_platform("h1", "h2")
    dispatched = ev.JobDispatched(at=3.0, job_id="j", attempt=1, hosts=("h1",))
    for event in (submitted("j"), dispatched):
        fold(state, event)
    assert touched(state, [dispatched]) == ({"h1"}, {"j"})
    mine, other = view_of(state, "h1", 7), view_of(state, "h2", 7)
    assert [job.job_id for job in mine.jobs] == ["j"]
    assert other.jobs == [] and other.host is not None and other.host.holder is None
    agent_state = as_state(decode_view(encode_view(mine)))
    assert agent_state.hosts["h1"].holder == "j"
    assert agent_state.jobs["j"].status is JobStatus.SCHEDULED
    assert set(agent_state.hosts) == {"h1"}


def test_an_ended_job_leaves_the_view_and_heartbeats_change_nothing() -> None:
    state = a_platform("h1")
    for event in (
        submitted("j"),
        ev.JobDispatched(at=3.0, job_id="j", attempt=1, hosts=("h1",)),
        ev.JobStarting(at=4.0, job_id="j", attempt=1, host="h1"),
        ev.JobRunning(at=4.0, job_id="j", attempt=1, host="h1"),
    ):
        fold(state, event)
    running = encode_view(view_of(state, "h1", 1))
    fold(state, ev.HostHeartbeat(at=5.0, host_id="h1"))
    assert encode_view(view_of(state, "h1", 1)) == running  # no view to send
    fold(state, ev.JobSucceeded(at=6.0, job_id="j", attempt=1, host="h1", exit_code=0))
    assert view_of(state, "h1", 2, candidates={"j"}).jobs == []


def test_progress_reports_mark_no_view_and_change_none_of_the_agents_answers() -> None:
    """JobStarting and JobRunning, of one host of a gang, touch no host: every host's
    answers (run, stop, current, caches) stay what they were; the end marks them all."""
    state = a_platform("h1", "h2")
    for event in (
        submitted("j"),
        ev.JobDispatched(at=3.0, job_id="j", attempt=1, hosts=("h1", "h2")),
    ):
        fold(state, event)

    def answers() -> list[object]:
        job = state.jobs["j"]
        return [
            (
                desired.should_run(job, h),
                desired.stop_wanted(job, h),
                desired.is_current(state, h, "j", 1),
                desired.stop_reason(state, h, "j", 1),
                desired.cache_chains(state, h),
                desired.attempt_on(state, h) is job,
            )
            for h in ("h1", "h2")
        ]

    before = answers()
    progress = [
        ev.JobStarting(at=4.0, job_id="j", attempt=1, host="h1"),
        ev.JobRunning(at=4.0, job_id="j", attempt=1, host="h1"),
    ]
    for event in progress:
        fold(state, event)
    assert touched(state, progress) == (set(), set())
    assert answers() == before
    assert state.jobs["j"].status is JobStatus.RUNNING  # carried by the next view that goes out
    ended = ev.JobSucceeded(at=6.0, job_id="j", attempt=1, host="h1", exit_code=0)
    fold(state, ended)
    assert touched(state, [ended]) == ({"h1", "h2"}, {"j"})
