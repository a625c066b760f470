"""`ReadModel`: the queries the gRPC layer answers from, returning proto-shaped dicts.

Lists page by keyset (the last row's sort key, in an opaque base64 token), so a
page costs the same wherever it starts. Reads that join several tables run in
one read-only repeatable-read transaction: one consistent position of the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from quartermaster.store import arns, listing
from quartermaster.store.documents import Doc, epoch_ms
from quartermaster.store.errors import StoreError, store_error
from quartermaster.store.position import PositionWatch
from quartermaster.store.schema import checked

Page = tuple[list[Doc], str | None]


class ReadModel:
    def __init__(self, pool: Any, schema: str, projection: str = "main") -> None:
        self.pool = pool
        self.schema = checked(schema)
        self._watch = PositionWatch(pool, self.schema, projection)

    # ---- position ------------------------------------------------------------------

    async def position(self) -> int:
        """The log position the tables reflect."""
        return await self._watch.position()

    async def wait_for(self, seq: int, timeout: float | None = 10.0) -> int:
        """Read-your-writes: return once the tables reflect log position `seq`."""
        return await self._watch.wait_for(seq, timeout)

    async def close(self) -> None:
        await self._watch.close()

    # ---- jobs ----------------------------------------------------------------------

    async def describe_job(self, job_id: str) -> Doc | None:
        """`ServiceJobDetail`, or None for an unknown job."""
        doc = await self._value(f"SELECT doc FROM {self.schema}.jobs WHERE job_id = $1", job_id)
        return _doc(doc) if doc is not None else None

    async def list_jobs(
        self,
        job_queue: str,
        quota_share: str | None = None,
        status: str | None = None,
        job_name: str | None = None,
        before_created_at: int | None = None,
        after_created_at: int | None = None,
        max_results: int | None = listing.DEFAULT_MAX_RESULTS,
        next_token: str | None = None,
        quota_shares: Sequence[str] | None = None,
    ) -> Page:
        """`ServiceJobSummary` documents, newest first (created_at, job_id descending), as AWS.

        `quota_shares` limits the list to those shares (what a member may see).

        `job_name` matches as AWS: case-insensitive, and a trailing `*` matches any name
        starting with what precedes it. `before_created_at` / `after_created_at` are
        epoch milliseconds, compared with the job's reported `created_at` (exclusive).
        """
        where = listing.Where(["job_queue = $1"], [arns.name_of(job_queue)])
        if quota_share:
            where.add("quota_share = {}", arns.name_of(quota_share))
        if quota_shares is not None:
            where.add("quota_share = ANY({})", [arns.name_of(s) for s in quota_shares])
        job_status = listing.job_status(status)
        if job_status is not None:
            where.add("status = {}", job_status)
        if job_name:
            if job_name.endswith("*"):
                prefix = listing.like_prefix(job_name[:-1].lower())
                where.add("lower(job_name) LIKE {} ESCAPE '\\'", prefix)
            else:
                where.add("lower(job_name) = {}", job_name.lower())
        # created_at is stored in seconds and reported rounded to ms.
        if before_created_at is not None:
            where.add("created_at < {}", (before_created_at - 0.5) / 1000)
        if after_created_at is not None:
            where.add("created_at >= {}", (after_created_at + 0.5) / 1000)
        if next_token:
            created_at, job_id = listing.read_token(next_token, "jobs", float, str)
            where.add("(created_at, job_id) < ({}, {})", created_at, job_id)
        limit = listing.limit(max_results)
        rows = await self._rows(
            f"SELECT summary, created_at, job_id FROM {self.schema}.jobs WHERE {where} "
            f"ORDER BY created_at DESC, job_id DESC LIMIT {limit + 1}",
            *where.args,
        )
        token = None
        if len(rows) > limit:
            rows = rows[:limit]
            token = listing.make_token("jobs", rows[-1]["created_at"], rows[-1]["job_id"])
        return [_doc(r["summary"]) for r in rows], token

    # ---- warm pools and hosts ------------------------------------------------------

    async def list_pools(
        self,
        status: str | None = None,
        job_queue: str | None = None,
        max_results: int | None = listing.DEFAULT_MAX_RESULTS,
        next_token: str | None = None,
    ) -> Page:
        """`WarmPoolSummary` documents by job id."""
        where = listing.Where(["true"], [])
        pool_status = listing.pool_status(status)
        if pool_status is not None:
            where.add("status = {}", pool_status)
        if job_queue:
            where.add("job_queue = {}", arns.name_of(job_queue))
        return await self._page("pools", "job_id", where, max_results, next_token)

    async def list_hosts(
        self, service_environment: str | None = None, state: str | None = None
    ) -> list[Doc]:
        """`NodeSummary` documents by host id (hosts are few: no paging)."""
        where = listing.Where(["true"], [])
        if service_environment:
            where.add("doc->>'service_environment' = {}", arns.name_of(service_environment))
        node_state = listing.node_state(state)
        if node_state is not None:
            where.add("doc->>'state' = {}", node_state)
        rows = await self._rows(
            f"SELECT doc FROM {self.schema}.hosts WHERE {where} ORDER BY host_id", *where.args
        )
        return [_doc(r["doc"]) for r in rows]

    # ---- configuration -------------------------------------------------------------

    async def describe_share(self, job_queue: str, name: str) -> Doc | None:
        """`DescribeQuotaShareResponse` (detail, oversubscribed, usage), or None."""
        row = await self._row(
            f"SELECT doc, oversubscribed, capacity_usage FROM {self.schema}.shares "
            "WHERE job_queue = $1 AND name = $2",
            arns.name_of(job_queue),
            arns.name_of(name),
        )
        if row is None:
            return None
        return {
            "quota_share": _doc(row["doc"]),
            "oversubscribed": row["oversubscribed"],
            "capacity_usage": _doc(row["capacity_usage"]),
        }

    async def list_shares(
        self,
        job_queue: str,
        max_results: int | None = listing.DEFAULT_MAX_RESULTS,
        next_token: str | None = None,
    ) -> Page:
        """`QuotaShareDetail` documents of a queue by name."""
        where = listing.Where(["job_queue = $1"], [arns.name_of(job_queue)])
        return await self._page("shares", "name", where, max_results, next_token)

    async def describe_queues(self, names: Sequence[str] | None = None) -> list[Doc]:
        """`JobQueueDetail` documents, of the named queues (names or ARNs) or all."""
        return await self._named("queues", names)

    async def describe_policies(self, names: Sequence[str] | None = None) -> list[Doc]:
        """`SchedulingPolicyDetail` documents, of the named policies (names or ARNs) or all."""
        return await self._named("policies", names)

    async def list_policies(
        self, max_results: int | None = listing.DEFAULT_MAX_RESULTS, next_token: str | None = None
    ) -> Page:
        """`SchedulingPolicyDetail` documents by name."""
        return await self._page(
            "policies", "name", listing.Where(["true"], []), max_results, next_token
        )

    async def describe_environments(self, names: Sequence[str] | None = None) -> list[Doc]:
        """`ServiceEnvironmentDetail` documents, of the named environments or all."""
        return await self._named("environments", names)

    async def queue_snapshot(
        self, job_queue: str, max_results: int | None = listing.DEFAULT_MAX_RESULTS
    ) -> Doc | None:
        """`GetJobQueueSnapshotResponse`, or None for an unknown queue.

        The front is the queue's RUNNABLE jobs in dispatch order (priority desc,
        created_at asc, job_id): each share's order merged on that same key.
        """
        queue, limit, s = arns.name_of(job_queue), listing.limit(max_results), self.schema
        order = "scheduling_priority DESC, created_at, job_id"
        try:
            async with (
                self.pool.acquire() as conn,
                conn.transaction(isolation="repeatable_read", readonly=True),
            ):
                if await conn.fetchval(f"SELECT 1 FROM {s}.queues WHERE name = $1", queue) is None:
                    return None
                front = await conn.fetch(
                    "SELECT job_id, job_name, quota_share, scheduling_priority, created_at, "
                    "status_reason, GREATEST(round(created_at * 1000)::bigint, "
                    "COALESCE((doc->'latest_attempt'->>'stopped_at')::bigint, 0)) AS at_position "
                    f"FROM {s}.jobs WHERE job_queue = $1 AND status = 'RUNNABLE' "
                    f"ORDER BY {order} LIMIT {limit}",
                    queue,
                )
                shares = await conn.fetch(
                    f"SELECT s.name, s.capacity_usage, heads.ids FROM {s}.shares s "
                    "CROSS JOIN LATERAL (SELECT coalesce(array_agg(h.job_id ORDER BY "
                    f"h.scheduling_priority DESC, h.created_at, h.job_id), '{{}}') AS ids FROM "
                    f"(SELECT job_id, scheduling_priority, created_at FROM {s}.jobs j "
                    "WHERE j.job_queue = s.job_queue AND j.quota_share = s.name "
                    f"AND j.status = 'RUNNABLE' ORDER BY {order} LIMIT {limit}) h) heads "
                    "WHERE s.job_queue = $1 ORDER BY s.name",
                    queue,
                )
                at = await conn.fetchval(
                    f"SELECT at FROM {s}.projection_position WHERE name = $1",
                    self._watch.projection,
                )
        except StoreError:
            raise
        except Exception as err:
            raise store_error(err, f"snapshot of queue {queue}") from err
        return {
            "job_queue_name": queue,
            "front_of_queue": [
                {
                    "job_id": r["job_id"],
                    "job_name": r["job_name"],
                    "job_arn": arns.job(r["job_id"]),
                    "quota_share_name": r["quota_share"],
                    "scheduling_priority": r["scheduling_priority"],
                    "created_at": epoch_ms(r["created_at"]),
                    "status_reason": r["status_reason"],
                    "earliest_time_at_position": r["at_position"],
                }
                for r in front
            ],
            "quota_shares": [
                {
                    "quota_share_name": r["name"],
                    "head_job_ids": list(r["ids"]),
                    "capacity_usage": _doc(r["capacity_usage"]),
                }
                for r in shares
            ],
            "last_updated_at": epoch_ms(at or 0.0),
            "total_capacity_usage": _total_usage(_doc(r["capacity_usage"]) for r in shares),
        }

    # ---- client tokens -------------------------------------------------------------

    async def claim_client_token(
        self, token: str, job_queue: str, request_hash: str, job_id: str
    ) -> tuple[str, str]:
        """Record `token` -> `job_id` unless recorded; return the recorded (job_id, hash).

        The caller compares the returned hash with its own: equal means the same
        request (answer with the returned job), different means a reused token.
        """
        s = self.schema
        try:
            async with self.pool.acquire() as conn:
                row = await conn.fetchrow(
                    f"INSERT INTO {s}.client_tokens (token, job_queue, request_hash, job_id) "
                    "VALUES ($1, $2, $3, $4) ON CONFLICT (token) DO NOTHING "
                    "RETURNING job_id, request_hash",
                    token,
                    job_queue,
                    request_hash,
                    job_id,
                )
                if row is None:  # a committed claim holds it (ON CONFLICT waited for it)
                    row = await conn.fetchrow(
                        f"SELECT job_id, request_hash FROM {s}.client_tokens WHERE token = $1",
                        token,
                    )
        except Exception as err:
            raise store_error(err, "claim a client token") from err
        return str(row["job_id"]), str(row["request_hash"])

    # ---- helpers -------------------------------------------------------------------

    async def _page(
        self,
        table: str,
        key: str,
        where: listing.Where,
        max_results: int | None,
        next_token: str | None,
    ) -> Page:
        if next_token:
            (after,) = listing.read_token(next_token, table, str)
            where.add(f"{key} > {{}}", after)
        limit = listing.limit(max_results)
        rows = await self._rows(
            f"SELECT {key}, doc FROM {self.schema}.{table} WHERE {where} "
            f"ORDER BY {key} LIMIT {limit + 1}",
            *where.args,
        )
        token = None
        if len(rows) > limit:
            rows = rows[:limit]
            token = listing.make_token(table, rows[-1][key])
        return [_doc(r["doc"]) for r in rows], token

    async def _named(self, table: str, names: Sequence[str] | None) -> list[Doc]:
        if names:
            rows = await self._rows(
                f"SELECT doc FROM {self.schema}.{table} WHERE name = ANY($1::text[]) ORDER BY name",
                [arns.name_of(n) for n in names],
            )
        else:
            rows = await self._rows(f"SELECT doc FROM {self.schema}.{table} ORDER BY name")
        return [_doc(r["doc"]) for r in rows]

    async def _rows(self, query: str, *args: Any) -> list[Any]:
        try:
            async with self.pool.acquire() as conn:
                return list(await conn.fetch(query, *args))
        except Exception as err:
            raise store_error(err, "query the read model") from err

    async def _row(self, query: str, *args: Any) -> Any:
        rows = await self._rows(query, *args)
        return rows[0] if rows else None

    async def _value(self, query: str, *args: Any) -> Any:
        row = await self._row(query, *args)
        return row[0] if row is not None else None


def _total_usage(usages: Iterable[list[Doc]]) -> list[Doc]:
    """`CapacityUsage` per unit summed over the queue's shares (`ShareCapacityUsage` lists)."""
    total: dict[str, int] = {}
    for usage in usages:
        for entry in usage:
            unit = entry["capacity_unit"]
            total[unit] = total.get(unit, 0) + int(entry.get("quantity", 0))
    return [{"capacity_unit": u, "quantity": n} for u, n in sorted(total.items())]


def _doc(value: Any) -> Any:
    return msgspec.json.decode(value)
