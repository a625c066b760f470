"""What the folded log wants from this host (pure: no I/O, no clock).

The agent compares these answers with what it runs locally after every folded
batch, and acts on the difference (launch, stop, confirm, clean up).
"""

from __future__ import annotations

from quartermaster.core import Job, State
from quartermaster.core.model import ACTIVE_STATUSES, WarmPoolStatus


def attempt_on(state: State, host_id: str) -> Job | None:
    """The job whose live attempt holds this host (running, stopping or kept for a pool)."""
    host = state.hosts.get(host_id)
    if host is None or host.holder is None:
        return None
    job = state.jobs.get(host.holder)
    if job is None or host_id not in job.hosts:
        return None
    return job


def is_current(state: State, host_id: str, job_id: str, attempt: int) -> bool:
    """Is this host's part of (job, attempt) still live, i.e. not yet ended in the log?"""
    job = state.jobs.get(job_id)
    return (
        job is not None
        and job.attempt_no == attempt
        and host_id in job.hosts
        and host_id not in job.ended_hosts
        and not job.awaiting_outcome
    )


def should_run(job: Job, host_id: str) -> bool:
    """The log wants this host's part of the job's current attempt running."""
    return (
        job.attempt_no > 0
        and job.status in ACTIVE_STATUSES
        and host_id in job.hosts
        and host_id not in job.ended_hosts
        and job.stop_cause is None
        and not job.is_terminated
        and not job.awaiting_outcome
    )


def stop_wanted(job: Job, host_id: str) -> bool:
    """The log asks this host's part of the current attempt to stop (and confirm it)."""
    return (
        host_id in job.hosts
        and host_id not in job.ended_hosts
        and not job.awaiting_outcome
        and (job.stop_cause is not None or job.is_terminated)
    )


def stop_reason(state: State, host_id: str, job_id: str, attempt: int) -> str | None:
    """Why a part that runs here must stop now, or None if it may go on."""
    job = state.jobs.get(job_id)
    if job is None:
        return "the job is unknown to the log"
    if not is_current(state, host_id, job_id, attempt):
        return "the attempt no longer runs on this host"
    if job.stop_cause is not None:
        return f"{job.stop_cause.value}: {job.stop_reason}"
    if job.is_terminated:
        return f"TERMINATED: {job.status_reason}"
    return None


def cache_chains(state: State, host_id: str) -> set[str]:
    """Warm pool chains whose cache this host must keep: its attempt's, or its pool's."""
    host = state.hosts.get(host_id)
    if host is None or host.holder is None:
        return set()
    pool = state.pools.get(host.holder)
    if pool is not None and pool.status is WarmPoolStatus.AVAILABLE and host_id in pool.hosts:
        return {pool.chain_id}
    job = state.jobs.get(host.holder)
    if job is not None and host_id in job.hosts:
        return {job.chain_id}
    return set()
