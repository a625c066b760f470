"""The rows one projector transaction writes, built from the folded state (no I/O).

Job, attempt, pool and host rows are written whenever their entity was touched.
Configuration rows carrying capacity figures (environments, shares) are
recomputed more widely, so only those that differ from what this projector
last wrote are kept; `remember` says what to record once the write commits.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from quartermaster import events as ev
from quartermaster.core.state import State
from quartermaster.store import documents as docs
from quartermaster.store.changes import Changes

ConfigKey = tuple[str, ...]
Row = tuple[Any, ...]

_encoder = msgspec.json.Encoder()


def _json(value: Any) -> str:
    return _encoder.encode(value).decode()


@dataclass
class Writes:
    seq: int
    at: float
    jobs: list[Row] = field(default_factory=list)
    attempts: list[Row] = field(default_factory=list)
    pools: list[Row] = field(default_factory=list)
    hosts: list[Row] = field(default_factory=list)
    environments: list[Row] = field(default_factory=list)
    policies: list[Row] = field(default_factory=list)
    queues: list[Row] = field(default_factory=list)
    shares: list[Row] = field(default_factory=list)
    share_deletes: list[Row] = field(default_factory=list)
    environment_deletes: list[Row] = field(default_factory=list)
    policy_deletes: list[Row] = field(default_factory=list)
    queue_deletes: list[Row] = field(default_factory=list)
    audit: list[Row] = field(default_factory=list)
    remember: dict[ConfigKey, str] = field(default_factory=dict)
    forget: list[ConfigKey] = field(default_factory=list)


def audit_rows(seq: int, subject: str, events: list[ev.AnyEvent]) -> list[Row]:
    return [
        (
            seq,
            idx,
            subject,
            ev.tag_of(event),
            event.at,
            ev.to_json(event).decode(),
            getattr(event, "principal", ""),
        )
        for idx, event in enumerate(events)
    ]


def build(
    state: State,
    changes: Changes,
    seq: int,
    audit: list[Row],
    written: Mapping[ConfigKey, str],
) -> Writes:
    """Rows for everything `changes` touched, as of `state` after the fold of `seq`."""
    out = Writes(seq=seq, at=state.now, audit=audit)
    _entities(state, changes, out)
    _config(state, changes, out, written)
    return out


def _entities(state: State, changes: Changes, out: Writes) -> None:
    seq = out.seq
    for job_id in sorted(changes.jobs):
        job = state.jobs.get(job_id)
        if job is not None:
            detail = docs.job_doc(state, job)
            out.jobs.append(
                (
                    job.job_id,
                    job.job_name,
                    job.queue,
                    job.share,
                    job.status.value,
                    job.status_reason,
                    job.priority,
                    job.created_at,
                    seq,
                    _json(docs.job_summary(detail)),
                    _json(detail),
                )
            )
            for attempt in job.attempts[changes.attempts_from.get(job_id, 0) :]:
                out.attempts.append(
                    (
                        job.job_id,
                        attempt.number,
                        list(attempt.hosts),
                        attempt.dispatched_at,
                        attempt.started_at,
                        attempt.stopped_at,
                        attempt.status_reason,
                        attempt.exit_code,
                    )
                )
        pool = state.pools.get(job_id)
        if pool is not None:
            out.pools.append(
                (pool.job_id, pool.status.value, pool.queue, seq, _json(docs.pool_doc(state, pool)))
            )
    for host_id in sorted(changes.hosts):
        host = state.hosts.get(host_id)
        if host is not None:
            out.hosts.append((host_id, seq, _json(docs.host_doc(state, host))))


def _config(state: State, changes: Changes, out: Writes, written: Mapping[ConfigKey, str]) -> None:
    def stamp(key: ConfigKey) -> tuple[float | None, float]:
        """(time of its Created event in these batches, time to use for a new row)."""
        return changes.created_at.get(key), changes.first_at.get(key, state.now)

    def changed(key: ConfigKey, encoded: str, explicit: bool) -> bool:
        if explicit or written.get(key) != encoded:
            out.remember[key] = encoded
            return True
        return False

    capacity_queues = set(changes.capacity_queues)
    queues_by_env: dict[str, list[str]] = defaultdict(list)
    for name, queue in state.queues.items():
        queues_by_env[queue.environment].append(name)

    for name in sorted(changes.environments | changes.capacity_environments):
        environment = state.environments.get(name)
        if environment is None:
            if name in changes.environments:  # deleted
                out.environment_deletes.append((name,))
                out.forget.append(("environment", name))
            continue
        key: ConfigKey = ("environment", name)
        doc = docs.environment_doc(state, environment)
        encoded = _json(doc)
        if changed(key, encoded, name in changes.environments):
            out.environments.append((name, *stamp(key), out.seq, encoded))
            capacity_queues.update(queues_by_env[name])  # oversubscription may have moved

    for name in sorted(changes.policies):
        key = ("policy", name)
        if name in state.policies:
            policy = docs.policy_doc(name, state.policies[name], tags=state.policy_tags.get(name))
            encoded = _json(policy)
            changed(key, encoded, True)
            out.policies.append((name, *stamp(key), out.seq, encoded))
        else:
            out.policy_deletes.append((name,))
            out.forget.append(key)

    for name in sorted(changes.queues):
        key = ("queue", name)
        if name in state.queues:
            encoded = _json(docs.queue_doc(state.queues[name]))
            changed(key, encoded, True)
            out.queues.append((name, *stamp(key), out.seq, encoded))
        else:
            out.queue_deletes.append((name,))
            out.forget.append(key)

    share_keys = set(changes.shares)
    share_keys.update(key for key in state.shares if key[0] in capacity_queues)
    for queue_name, share_name in sorted(share_keys):
        key = ("share", queue_name, share_name)
        share = state.shares.get((queue_name, share_name))
        if share is None:
            out.share_deletes.append((queue_name, share_name))
            out.forget.append(key)
            continue
        doc = docs.share_doc(share)
        usage = docs.share_usage(state, share)
        over = docs.oversubscribed(state, share)
        encoded = _json([doc, usage, over])
        if changed(key, encoded, (queue_name, share_name) in changes.shares):
            row = (queue_name, share_name, *stamp(key), out.seq, over, _json(usage), _json(doc))
            out.shares.append(row)
