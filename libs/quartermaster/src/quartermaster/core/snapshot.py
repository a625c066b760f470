"""Snapshots of the folded state, so a restarted service replays only the tail of the log.

Only the entities are stored; every index is derived again on load, which
also makes a snapshot a consistency check of the indexes. Format 2 stores jobs,
attempts, hosts and pools as arrays (see `core.model`); a snapshot of another
format raises `SnapshotFormatError`, and its reader replays the log instead.
A lean snapshot (`take(..., lean=True)`) leaves out what no pass reads (job
payloads): for a scheduler, never for a service that answers about jobs.
"""

from __future__ import annotations

import msgspec

from quartermaster.core.model import (
    Environment,
    Host,
    Job,
    Queue,
    Share,
    WarmPool,
    WarmPoolStatus,
)
from quartermaster.core.replay import derive_indexes
from quartermaster.core.state import State

FORMAT = 2


class SnapshotFormatError(ValueError):
    """The snapshot was written in another format (or is damaged): replay the log."""


class _Header(msgspec.Struct):
    format: int = 0


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
_header = msgspec.msgpack.Decoder(_Header)


def take(state: State, seq: int, lean: bool = False) -> bytes:
    jobs = list(state.jobs.values())
    if lean:
        jobs = [msgspec.structs.replace(j, payload="") if j.payload else j for j in jobs]
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
            jobs,
            list(state.hosts.values()),
            list(state.pools.values()),
            dict(state.policy_tags),
        )
    )


def restore(data: bytes) -> tuple[State, int]:
    """The state and the log position it was taken at."""
    try:
        snap = _decoder.decode(data)
    except msgspec.DecodeError as e:
        try:
            found = _header.decode(data).format
        except msgspec.DecodeError:
            found = 0
        raise SnapshotFormatError(
            f"snapshot format {found or 'unknown'} is not {FORMAT} ({e})"
        ) from None
    if snap.format != FORMAT:
        raise SnapshotFormatError(f"snapshot format {snap.format} is not {FORMAT}")
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
    """Every index and counter from the entities."""
    derive_indexes(state)
    for job in state.jobs.values():
        if job.hosts:
            key = (job.queue, job.share, job.unit)
            state.charge(key, state.environment_of(job.queue), job.count)
            if job.stop_cause is not None and len(job.ended_hosts) < len(job.hosts):
                state.stopping[key] += job.count
        if job.awaiting_outcome:
            state.awaiting_outcome.add(job.job_id)
        elif job.retained:
            state.retained.add(job.job_id)
    for pool in state.pools.values():
        if pool.status is WarmPoolStatus.AVAILABLE:
            state.charge((pool.queue, pool.share, pool.unit), pool.environment, pool.count)
