"""Decisions that settle what already happened, before any capacity is handed out.

Retry or fail attempts that failed, open warm pools for jobs that ended,
expire pools, time out attempts and declare silent hosts lost. These run
first and alone: the shell folds them and runs the pass again, so the
allocation step always sees a settled state.
"""

from __future__ import annotations

from quartermaster import events as ev
from quartermaster.core import retry
from quartermaster.core.lifecycle import MAX_CHAIN_SECONDS
from quartermaster.core.model import HostStatus, WarmPool
from quartermaster.core.state import State


def settle_decisions(
    state: State, heartbeat_timeout: float | None, queues: frozenset[str] | None, hosts: bool
) -> list[ev.Event]:
    now = state.now

    def mine(queue: str) -> bool:
        return queues is None or queue in queues

    out: list[ev.Event] = []
    for job_id in sorted(state.awaiting_outcome):
        job = state.jobs[job_id]
        if not mine(job.queue):
            continue
        if retry.retries_left(job) and retry.action_for(job) == "RETRY":
            out.append(
                ev.JobRetried(
                    at=now, job_id=job_id, attempt=job.attempts_used + 1, reason=job.failure_reason
                )
            )
        else:
            out.append(ev.JobFinallyFailed(at=now, job_id=job_id, reason=job.failure_reason))
    for job_id in sorted(state.retained):
        job = state.jobs[job_id]
        if not mine(job.queue):
            continue
        chain_start = job.chain_started_at if job.chain_started_at is not None else now
        expires = min(now + job.keep_alive_seconds, chain_start + MAX_CHAIN_SECONDS)
        out.append(
            ev.WarmPoolAvailable(
                at=now,
                job_id=job_id,
                hosts=job.hosts,
                expires_at=expires,
                chain_id=job.chain_id,
                chain_started_at=chain_start,
            )
        )
    for expires_at, pool_id in state.pool_expiries:
        pool = state.pools[pool_id]
        if not mine(pool.queue):
            continue
        reason = _pool_end(state, pool, expires_at, now)
        if reason is not None:
            end = (
                min(now, expires_at)
                if reason is not ev.WarmPoolTerminationReason.HOST_UNHEALTHY
                else now
            )
            out.append(
                ev.WarmPoolTerminated(
                    at=now, job_id=pool_id, reason=reason, billable_seconds=billable(pool, end)
                )
            )
    for deadline, job_id in state.deadlines:
        if deadline > now:
            break
        job = state.jobs[job_id]
        out.append(
            ev.JobTimedOut(
                at=now,
                job_id=job_id,
                attempt=job.attempt_no,
                reason=f"Job attempt duration exceeded timeout ({job.timeout_seconds} s)",
            )
        )
    if hosts and heartbeat_timeout is not None:
        for host_id in sorted(state.hosts):
            host = state.hosts[host_id]
            if host.status is HostStatus.HEALTHY and host.last_heartbeat + heartbeat_timeout < now:
                out.append(
                    ev.HostLost(
                        at=now, host_id=host_id, reason=f"no heartbeat for {heartbeat_timeout:g} s"
                    )
                )
    return out


def _pool_end(
    state: State, pool: WarmPool, expires_at: float, now: float
) -> ev.WarmPoolTerminationReason | None:
    if any(state.hosts[h].status is not HostStatus.HEALTHY for h in pool.hosts):
        return ev.WarmPoolTerminationReason.HOST_UNHEALTHY
    if expires_at > now:
        return None
    if pool.user_terminated:
        return ev.WarmPoolTerminationReason.USER_TERMINATED
    if expires_at >= pool.chain_started_at + MAX_CHAIN_SECONDS:
        return ev.WarmPoolTerminationReason.MAX_LIFETIME_REACHED
    return ev.WarmPoolTerminationReason.EXPIRED


def billable(pool: WarmPool, until: float) -> int:
    """Whole seconds the pool sat Available, up to `until`."""
    since = pool.available_since if pool.available_since is not None else until
    return max(0, int(until - since))
