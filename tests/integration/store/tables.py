"""The check every projector test ends with: the tables say exactly what the fold says."""

from __future__ import annotations

from typing import Any

import msgspec

from quartermaster.core import State
from quartermaster.store import documents as docs


def _json(value: Any) -> Any:
    return msgspec.json.decode(value)


def _no_created(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "created_at"}


async def assert_tables_match(pool: Any, schema: str, state: State) -> None:
    """Every row equals the document recomputed from `state`; no row is missing or extra."""
    s = schema
    async with pool.acquire() as conn:
        jobs = await conn.fetch(
            f"SELECT job_id, job_name, job_queue, quota_share, status, status_reason, "
            f"scheduling_priority, created_at, summary, doc FROM {s}.jobs"
        )
        attempts = await conn.fetch(f"SELECT * FROM {s}.attempts")
        pools = await conn.fetch(f"SELECT job_id, status, job_queue, doc FROM {s}.pools")
        hosts = await conn.fetch(f"SELECT host_id, doc FROM {s}.hosts")
        shares = await conn.fetch(
            f"SELECT job_queue, name, doc, capacity_usage, oversubscribed FROM {s}.shares"
        )
        environments = await conn.fetch(f"SELECT name, doc FROM {s}.environments")
        queues = await conn.fetch(f"SELECT name, doc FROM {s}.queues")
        policies = await conn.fetch(f"SELECT name, doc FROM {s}.policies")

    assert {r["job_id"]: _json(r["doc"]) for r in jobs} == {
        job_id: docs.job_doc(state, job) for job_id, job in state.jobs.items()
    }
    for r in jobs:
        job = state.jobs[r["job_id"]]
        assert _json(r["summary"]) == docs.job_summary(docs.job_doc(state, job))
        assert (
            r["job_name"],
            r["job_queue"],
            r["quota_share"],
            r["status"],
            r["status_reason"],
            r["scheduling_priority"],
            r["created_at"],
        ) == (
            job.job_name,
            job.queue,
            job.share,
            job.status.value,
            job.status_reason,
            job.priority,
            job.created_at,
        )
    assert {
        (r["job_id"], r["attempt"]): (
            list(r["hosts"]),
            r["dispatched_at"],
            r["started_at"],
            r["stopped_at"],
            r["status_reason"],
            r["exit_code"],
        )
        for r in attempts
    } == {
        (job.job_id, a.number): (
            list(a.hosts),
            a.dispatched_at,
            a.started_at,
            a.stopped_at,
            a.status_reason,
            a.exit_code,
        )
        for job in state.jobs.values()
        for a in job.attempts
    }
    assert {r["job_id"]: (r["status"], r["job_queue"], _json(r["doc"])) for r in pools} == {
        p.job_id: (p.status.value, p.queue, docs.pool_doc(state, p)) for p in state.pools.values()
    }
    assert {r["host_id"]: _json(r["doc"]) for r in hosts} == {
        h.host_id: docs.host_doc(state, h) for h in state.hosts.values()
    }
    assert {
        (r["job_queue"], r["name"]): (
            _no_created(_json(r["doc"])),
            _json(r["capacity_usage"]),
            r["oversubscribed"],
        )
        for r in shares
    } == {
        key: (
            _no_created(docs.share_doc(share)),
            docs.share_usage(state, share),
            docs.oversubscribed(state, share),
        )
        for key, share in state.shares.items()
    }
    assert {r["name"]: _no_created(_json(r["doc"])) for r in environments} == {
        name: _no_created(docs.environment_doc(state, env))
        for name, env in state.environments.items()
    }
    assert {r["name"]: _no_created(_json(r["doc"])) for r in queues} == {
        name: _no_created(docs.queue_doc(queue)) for name, queue in state.queues.items()
    }
    assert {r["name"]: _no_created(_json(r["doc"])) for r in policies} == {
        name: _no_created(docs.policy_doc(name, strategy))
        for name, strategy in state.policies.items()
    }
