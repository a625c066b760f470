"""Folding a log up to a point, and the readable shape of the state there.

`fold_until` stops before the first message past a sequence number or past a time
(`at`, epoch seconds), so `qm audit state --at` and explain see the state exactly
as the services had it then.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from quartermaster.audit.envelope import Envelope, admit
from quartermaster.core import State, fold
from quartermaster.core.model import WarmPoolStatus
from quartermaster.core.replay import replaying
from quartermaster.core.waiting import Explainer


class ShareUsage(msgspec.Struct, frozen=True):
    """One quota share's hold on one capacity unit (spec section 3)."""

    queue: str
    share: str
    unit: str
    strategy: str
    in_use: int
    limit: int
    borrowed: int
    stopping: int  # of in_use: stops requested, not yet confirmed


class QueueHead(msgspec.Struct, frozen=True):
    queue: str
    share: str
    unit: str
    position: int  # 1 = next in the share's order
    job_id: str
    job_name: str
    priority: int
    created_at: float
    reason: str


class PoolRow(msgspec.Struct, frozen=True):
    job_id: str
    queue: str
    share: str
    unit: str
    count: int
    hosts: tuple[str, ...]
    available_since: float
    expires_at: float


class Instant(msgspec.Struct, frozen=True):
    """The capacity picture at one position of the log."""

    seq: int
    at: float
    usage: list[ShareUsage]
    heads: list[QueueHead]
    pools: list[PoolRow]


def fold_until(
    envelopes: Iterable[Envelope], seq: int | None = None, at: float | None = None
) -> tuple[State, int]:
    """The state after every message up to `seq` (inclusive) and not later than `at`."""
    state, position = State(), 0
    with replaying(state):
        for envelope in envelopes:
            if seq is not None and envelope.seq > seq:
                break
            events, _ = admit(envelope)
            if at is not None and any(e.at > at for e in events):
                break
            for event in events:
                fold(state, event)
            position = envelope.seq
    return state, position


def usage(state: State, queue: str | None = None, unit: str | None = None) -> list[ShareUsage]:
    """Every share's use of every unit it has a limit for or holds, by queue, share, unit."""
    rows = []
    for (q, name), share in sorted(state.shares.items()):
        if queue is not None and q != queue:
            continue
        units = set(share.limits) | {
            u for (sq, sn, u), n in state.use.items() if (sq, sn) == (q, name) and n
        }
        for u in sorted(units):
            if unit is not None and u != unit:
                continue
            key = (q, name, u)
            in_use, limit = state.use.get(key, 0), share.own(u)
            rows.append(
                ShareUsage(
                    q,
                    name,
                    u,
                    share.strategy.value,
                    in_use,
                    limit,
                    max(0, in_use - limit),
                    state.stopping.get(key, 0),
                )
            )
    return rows


def heads(state: State, per_share: int = 3, queue: str | None = None) -> list[QueueHead]:
    """The first RUNNABLE jobs of every share, in the order the pass considers them."""
    rows = []
    waits = Explainer(state)
    for (q, name, u), runnable in sorted(state.runnable.items()):
        if queue is not None and q != queue:
            continue
        for position, (*_, job_id) in enumerate(runnable[:per_share], start=1):
            job = state.jobs[job_id]
            rows.append(
                QueueHead(
                    q,
                    name,
                    u,
                    position,
                    job_id,
                    job.job_name,
                    job.priority,
                    job.created_at,
                    reason.message if (reason := waits.why(job_id)) else job.status_reason,
                )
            )
    return rows


def pools(state: State, queue: str | None = None) -> list[PoolRow]:
    """Available warm pools, the one expiring first first."""
    rows = []
    for pool in state.pools.values():
        if pool.status is not WarmPoolStatus.AVAILABLE or (
            queue is not None and pool.queue != queue
        ):
            continue
        assert pool.available_since is not None and pool.expires_at is not None
        rows.append(
            PoolRow(
                pool.job_id,
                pool.queue,
                pool.share,
                pool.unit,
                pool.count,
                pool.hosts,
                pool.available_since,
                pool.expires_at,
            )
        )
    return sorted(rows, key=lambda p: (p.expires_at, p.job_id))


def instant(state: State, seq: int, per_share: int = 3, queue: str | None = None) -> Instant:
    return Instant(
        seq, state.now, usage(state, queue), heads(state, per_share, queue), pools(state, queue)
    )
