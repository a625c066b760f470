"""Decisions that settle what already happened, before any capacity is handed out.

Retry or fail attempts that failed, open warm pools for jobs that ended (or end
their chain), restate pools' expiries after keep-alive updates, expire pools,
time out attempts and declare silent hosts lost. These run first and alone: the
shell folds them and runs the pass again, so the allocation step always sees a
settled state. Each decision names its rule and inputs.
"""

from __future__ import annotations

from collections.abc import Mapping

from quartermaster import events as ev
from quartermaster.core import retry, warm_pools
from quartermaster.core.model import HostStatus, Job, WarmPool
from quartermaster.core.state import State
from quartermaster.events import Rule


def settle_decisions(
    state: State,
    heartbeat_timeout: float | None,
    queues: frozenset[str] | None,
    hosts: bool,
    liveness: Mapping[str, float] | None = None,
) -> list[ev.Event]:
    """`liveness`: each host's newest heartbeat instant known outside the log (the
    liveness bucket), an input like a request; the log's own signs of life
    (registration, heartbeats of older logs) count too."""
    now = state.now

    def mine(queue: str) -> bool:
        return queues is None or queue in queues

    out: list[ev.Event] = []
    for job_id in sorted(state.awaiting_outcome):
        job = state.jobs[job_id]
        if mine(job.queue):
            out.append(_outcome(job, now))
    for job_id in sorted(state.retained):
        job = state.jobs[job_id]
        if mine(job.queue):
            out.append(_pool_for(job, now))
    for _, pool_id in state.pool_expiries:
        pool = state.pools[pool_id]
        if mine(pool.queue):
            decision = _pool_check(state, pool, now)
            if decision is not None:
                out.append(decision)
    for deadline, job_id in state.deadlines:
        if deadline > now:
            break
        job = state.jobs[job_id]
        if not mine(job.queue):  # another scheduler leads that queue: its timeout, not ours
            continue
        out.append(
            ev.JobTimedOut(
                at=now,
                job_id=job_id,
                attempt=job.attempt_no,
                reason=f"Job attempt duration exceeded timeout ({job.timeout_seconds} s)",
                timeout_seconds=job.timeout_seconds,
            )
        )
    if hosts and heartbeat_timeout is not None:
        for host_id in sorted(state.hosts):
            host = state.hosts[host_id]
            if host.status is not HostStatus.HEALTHY:
                continue
            last = host.last_heartbeat
            if liveness is not None:
                last = max(last, liveness.get(host_id, last))
            if last + heartbeat_timeout < now:
                out.append(
                    ev.HostLost(
                        at=now,
                        host_id=host_id,
                        reason=f"no heartbeat for {heartbeat_timeout:g} s",
                        last_heartbeat_at=last,
                        heartbeat_timeout_seconds=heartbeat_timeout,
                    )
                )
    return out


def _outcome(job: Job, now: float) -> ev.Event:
    """A failed attempt: retried while retryStrategy allows, else the job fails."""
    rule, index = retry.outcome(job)
    if rule is Rule.RETRY:
        return ev.JobRetried(
            at=now,
            job_id=job.job_id,
            attempt=job.attempts_used + 1,
            reason=job.failure_reason,
            attempts_allowed=job.retry_attempts,
            exit_rule_index=index,
        )
    return ev.JobFinallyFailed(
        at=now,
        job_id=job.job_id,
        reason=job.failure_reason,
        rule=rule,
        attempts_used=job.attempts_used,
        exit_rule_index=index,
    )


def _pool_for(job: Job, now: float) -> ev.Event:
    """An ended job's kept hosts open a pool, unless its chain has lived its 28 days."""
    chain_start = job.chain_started_at if job.chain_started_at is not None else now
    if warm_pools.chain_over(chain_start, now):  # only a job that ran on a pool has a chain
        return ev.WarmPoolTerminated(
            at=now,
            job_id=job.job_id,
            reason=ev.WarmPoolTerminationReason.MAX_LIFETIME_REACHED,
            billable_seconds=0,
            rule=Rule.CHAIN_LIMIT,
            chain_started_at=chain_start,
        )
    expiry = warm_pools.opening(now, job.keep_alive_seconds, chain_start)
    return ev.WarmPoolAvailable(
        at=now,
        job_id=job.job_id,
        hosts=job.hosts,
        expires_at=expiry.expires_at,
        chain_id=job.chain_id,
        chain_started_at=chain_start,
        rule=expiry.rule,
        keep_alive_seconds=job.keep_alive_seconds,
    )


def _pool_check(state: State, pool: WarmPool, now: float) -> ev.Event | None:
    """An Available pool: a keep-alive update to decide, or its end, or nothing."""
    healthy = all(
        h in state.hosts and state.hosts[h].status is HostStatus.HEALTHY for h in pool.hosts
    )
    requested = pool.requested_keep_alive
    if requested is not None and healthy:
        assert pool.keep_alive_requested_at is not None
        expiry = warm_pools.restated(pool, requested, pool.keep_alive_requested_at)
        return ev.WarmPoolAvailable(
            at=now,
            job_id=pool.job_id,
            hosts=pool.hosts,
            expires_at=expiry.expires_at,
            chain_id=pool.chain_id,
            chain_started_at=pool.chain_started_at,
            rule=expiry.rule,
            keep_alive_seconds=requested,
        )
    ended = warm_pools.ending(pool, healthy, now)
    if ended is None:
        return None
    reason, until = ended
    return ev.WarmPoolTerminated(
        at=now,
        job_id=pool.job_id,
        reason=reason,
        billable_seconds=warm_pools.billable(pool, until),
        expires_at=pool.expires_at,
        chain_started_at=pool.chain_started_at,
    )
