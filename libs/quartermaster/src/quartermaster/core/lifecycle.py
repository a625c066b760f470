"""How an attempt ends: the shared steps of the fold for stops, exits and losses.

An attempt holds all its hosts until every one of them has reported its end
(exit, or confirmed stop); only then does the job move on, so a multi-host
job takes and gives back its hosts all at once.
"""

from __future__ import annotations

from quartermaster.core.model import (
    FAILED,
    HOST_HEALTHY,
    POOL_IN_USE,
    POOL_TERMINATED,
    RUNNABLE,
    RUNNING,
    STOP_HOST_LOST,
    STOP_PREEMPTED,
    STOP_TIMED_OUT,
    SUCCEEDED,
    Job,
    StopCause,
    WarmPool,
)
from quartermaster.core.state import DEADLINES, State
from quartermaster.events import FailureClass, WarmPoolTerminationReason

RECENT_PREEMPTIONS = 10
INFRASTRUCTURE_ERROR = FailureClass.INFRASTRUCTURE_ERROR  # a plain name: read per attempt
CAPACITY_REASON = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"


def current(state: State, job_id: str, attempt: int) -> Job | None:
    """The job if `attempt` is its live attempt; reports for older attempts are stale."""
    job = state.jobs.get(job_id)
    if job is None or job.attempt_no != attempt or not job.hosts or job.awaiting_outcome:
        return None
    return job


def request_stop(state: State, job: Job, cause: StopCause, reason: str) -> None:
    """Ask the attempt's hosts to stop; they stay charged until each confirms."""
    if job.stop_cause is not None:
        return
    state.drop_victim(job)
    state.clear_deadline(job)
    job.stop_cause = cause
    job.stop_reason = reason
    state.stopping[state.share_key(job)] += job.count


def host_ended(
    state: State, job_id: str, attempt: int, host: str, at: float, exit_code: int | None
) -> None:
    job = current(state, job_id, attempt)
    if job is not None:
        end_on_host(state, job, host, at, exit_code)


def end_on_host(state: State, job: Job, host: str, at: float, exit_code: int | None) -> None:
    """`host_ended` for the job whose live attempt the report names (`current`)."""
    hosts, ended = job.hosts, job.ended_hosts
    if host not in hosts or host in ended:
        return
    job.ended_hosts = ended = (*ended, host)
    if exit_code is not None:
        job.attempts[-1].exit_code = exit_code
    if len(ended) == len(hosts):
        finalize(state, job, at)


def host_lost(state: State, job: Job, host_id: str, at: float, why: str) -> None:
    reason = f"{CAPACITY_REASON} - host {host_id} lost ({why})"
    if job.status is RUNNING:
        reason = f"INFRASTRUCTURE:HOST_LOST - host {host_id} lost ({why})"
    if job.stop_cause is None or job.stop_cause is STOP_PREEMPTED:
        if job.stop_cause is not None:
            state.stopping[state.share_key(job)] -= job.count
            job.stop_cause = None
            job.attempts[-1].seconds_at_risk = None  # lost to the host, not to a preemption
        if not job.is_terminated:
            request_stop(state, job, STOP_HOST_LOST, reason)
    host_ended(state, job.job_id, job.attempt_no, host_id, at, exit_code=None)


def _poolable(job: Job) -> bool:
    """The attempt ended in a way that may leave its hosts warm (spec section 5).

    The hosts are only kept: whether a pool opens, and until when (keep-alive, the
    chain's 28 days), the next pass decides and records.
    """
    if job.keep_alive_seconds <= 0 or not job.started:
        return False
    if job.failure is INFRASTRUCTURE_ERROR:
        return False
    return job.stop_cause not in (STOP_PREEMPTED, STOP_HOST_LOST)


def finalize(state: State, job: Job, at: float) -> None:
    """Every host of the attempt has ended: decide what the job becomes."""
    key = (job.queue, job.share, job.unit)
    job_id = job.job_id
    # State.drop_victim (preemption.victim_order: -saved_at) and State.clear_deadline, inlined
    saved = job.last_checkpoint_at
    state.victims.drop(
        key, (job.priority, -(job.dispatched_at if saved is None else saved), job_id)
    )
    timeout, running_at = job.timeout_seconds, job.running_at
    if timeout is not None and running_at is not None:
        state.timeline.drop(DEADLINES, (running_at + timeout, job_id))
    cause = job.stop_cause
    if cause is not None:
        state.stopping[key] -= job.count
    attempt = job.attempts[-1]
    attempt.stopped_at = at
    failure = job.failure
    if failure is None and cause is None and not job.is_terminated:  # the usual end
        attempt.status_reason = "Essential container in task exited"
        job.status = SUCCEEDED
        job.stopped_at = at
        release(state, job, keep=job.keep_alive_seconds > 0 and job.started)  # _poolable
        return
    poolable = _poolable(job)
    interrupted = cause is not None and failure is None

    if job.is_terminated:
        attempt.status_reason = job.status_reason
        release(state, job, keep=poolable)
    elif cause is STOP_HOST_LOST:
        attempt.status_reason = job.stop_reason
        release(state, job, keep=False)
        make_runnable(state, job, job.stop_reason)
    elif job.failure is None and cause is None:
        attempt.status_reason = "Essential container in task exited"
        job.status = SUCCEEDED
        job.stopped_at = at
        release(state, job, keep=poolable)
    elif job.failure is INFRASTRUCTURE_ERROR:
        reason = f"{CAPACITY_REASON} - {job.failure_reason}"
        attempt.status_reason = reason
        release(state, job, keep=False)
        make_runnable(state, job, reason)
    elif job.failure is not None or cause is STOP_TIMED_OUT:
        if job.failure is None:
            job.failure = FailureClass.ALGORITHM_ERROR
            job.failure_reason = job.stop_reason
        attempt.status_reason = job.failure_reason
        job.awaiting_outcome = True
        state.awaiting_outcome.add(job.job_id)
        if poolable:
            job.retained = True  # kept until the outcome says whether the job ends
        else:
            release(state, job, keep=False)
    elif cause is STOP_PREEMPTED and interrupted:
        attempt.status_reason = job.stop_reason
        _preempted(state, job, at)
    else:  # stopped with no cause we asked for: the host lost the container
        reason = f"{CAPACITY_REASON} - attempt interrupted on its host"
        attempt.status_reason = reason
        release(state, job, keep=False)
        make_runnable(state, job, reason)


def _preempted(state: State, job: Job, at: float) -> None:
    job.preempted_count += 1
    lost = job.attempts[-1].seconds_at_risk
    if lost is not None:  # as its preemption decision recorded it
        job.lost_unit_seconds += job.count * lost
    job.recent_preemptions = (*job.recent_preemptions, job.attempts[-1])[-RECENT_PREEMPTIONS:]
    release(state, job, keep=False)
    limit = job.preemption_retries
    if limit is not None and job.preempted_count > limit:
        job.status = FAILED
        job.status_reason = (
            f"Preempted {job.preempted_count} times: preemptionRetriesBeforeTermination "
            f"({limit}) exhausted"
        )
        job.stopped_at = at
    else:
        make_runnable(state, job, job.stop_reason)


def release(state: State, job: Job, keep: bool) -> None:
    """Give the attempt's hosts back, or keep them (charged) for a warm pool."""
    job_id = job.job_id
    if keep:
        job.retained = True
        status = job.status
        if status is SUCCEEDED or status is FAILED:
            state.retained.add(job_id)
        return
    pool = state.pools.get(job_id)
    if pool is not None and pool.status is POOL_IN_USE:
        _end_in_use_pool(pool, job)
    queue, unit, count = job.queue, job.unit, job.count
    env = state.queues[queue].environment
    hosts, free_bound = state.hosts, state.free_bound
    for host_id in job.hosts:
        host = hosts.get(host_id)
        if host is not None and host.holder == job_id:  # State.mark_free, inlined
            host.holder = None
            host.holder_env = None
            if host.status is HOST_HEALTHY:
                host_env = host.environment
                if host_env is None:
                    state.free_unbound.put(host.unit, host_id)
                else:
                    free_bound.put((host_env, host.unit), host_id)
    state.use[(queue, job.share, unit)] -= count  # State.charge, inlined
    state.env_use[(env, unit)] -= count
    job.hosts = ()
    if job.retained:
        job.retained = False
        state.retained.discard(job_id)


def _end_in_use_pool(pool: WarmPool, job: Job) -> None:
    """The pool this job took ends with it when the job leaves no pool of its own,
    named after how the attempt ended (a fact of the reports, not a rule)."""
    if job.stop_cause is STOP_PREEMPTED:
        reason = WarmPoolTerminationReason.CAPACITY_RECLAIMED
    elif job.stop_cause is STOP_HOST_LOST or job.failure is INFRASTRUCTURE_ERROR:
        reason = WarmPoolTerminationReason.HOST_UNHEALTHY
    else:
        reason = WarmPoolTerminationReason.EXPIRED
    end_in_use_pool(pool, reason)


def end_in_use_pool(pool: WarmPool, reason: WarmPoolTerminationReason) -> None:
    pool.status = POOL_TERMINATED
    pool.termination_reason = reason
    pool.hosts = ()


def make_runnable(state: State, job: Job, reason: str) -> None:
    job.status = RUNNABLE
    job.status_reason = reason
    job.hosts = ()
    job.stop_cause = None
    state.enqueue(job)


def settle_outcome(state: State, job: Job) -> None:
    job.awaiting_outcome = False
    state.awaiting_outcome.discard(job.job_id)
