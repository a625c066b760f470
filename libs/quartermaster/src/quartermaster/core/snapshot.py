"""Snapshots of the folded state, so a restarted service replays only the tail of the log.

Only the entities are stored; every index is derived again on load, which
also makes a snapshot a consistency check of the indexes.
"""

from __future__ import annotations

import msgspec

from quartermaster.core.model import (
    ACTIVE_STATUSES,
    Environment,
    Host,
    HostStatus,
    Job,
    JobStatus,
    Queue,
    Share,
    WarmPool,
    WarmPoolStatus,
)
from quartermaster.core.state import State

FORMAT = 1


class Snapshot(msgspec.Struct, frozen=True):
    format: int
    seq: int  # position in the log the snapshot was taken at (the caller's numbering)
    now: float
    folded: int
    environments: list[Environment]
    policies: dict[str, str]
    queues: list[Queue]
    shares: list[Share]
    jobs: list[Job]
    hosts: list[Host]
    pools: list[WarmPool]
    policy_tags: dict[str, dict[str, str]] = {}


_decoder = msgspec.msgpack.Decoder(Snapshot)


def take(state: State, seq: int) -> bytes:
    return msgspec.msgpack.encode(
        Snapshot(
            FORMAT,
            seq,
            state.now,
            state.seq,
            list(state.environments.values()),
            dict(state.policies),
            list(state.queues.values()),
            list(state.shares.values()),
            list(state.jobs.values()),
            list(state.hosts.values()),
            list(state.pools.values()),
            dict(state.policy_tags),
        )
    )


def restore(data: bytes) -> tuple[State, int]:
    """The state and the log position it was taken at."""
    snap = _decoder.decode(data)
    state = State()
    state.now = snap.now
    state.seq = snap.folded
    state.environments = {e.name: e for e in snap.environments}
    state.policies = dict(snap.policies)
    state.policy_tags = dict(snap.policy_tags)
    state.queues = {q.name: q for q in snap.queues}
    for share in snap.shares:
        state.put_share(share)
    state.hosts = {h.host_id: h for h in snap.hosts}
    state.jobs = {j.job_id: j for j in snap.jobs}
    state.pools = {p.job_id: p for p in snap.pools}
    _reindex(state)
    return state, snap.seq


def _reindex(state: State) -> None:
    for host in state.hosts.values():
        if host.holder is None and host.status is HostStatus.HEALTHY:
            state._free_list(host).add(host.host_id)
    for job in state.jobs.values():
        key = state.share_key(job)
        if job.status is JobStatus.RUNNABLE and not job.awaiting_outcome:
            state.enqueue(job)
        if job.hosts:
            state.charge(key, state.environment_of(job.queue), job.count)
            if job.stop_cause is not None and len(job.ended_hosts) < len(job.hosts):
                state.stopping[key] += job.count
        if job.status in ACTIVE_STATUSES and job.stop_cause is None and not job.awaiting_outcome:
            state.add_victim(job)
            state.set_deadline(job)
        if job.awaiting_outcome:
            state.awaiting_outcome.add(job.job_id)
        elif job.retained:
            state.retained.add(job.job_id)
    for pool in state.pools.values():
        if pool.status is WarmPoolStatus.AVAILABLE:
            state.charge((pool.queue, pool.share, pool.unit), pool.environment, pool.count)
            state.index_pool(pool)
