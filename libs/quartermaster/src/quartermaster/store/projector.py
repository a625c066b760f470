"""The projector: folds the log and keeps the read model's tables in step with it.

It owns a `State` (the fold is the single source of truth) and, for each run
of log messages, folds them, then in ONE transaction writes the rows of every
entity they touched, their audit rows and its tracking record
(`projection_position`), and notifies the position channel: as one statement
when only entity and audit rows change (`combined`: one round trip instead of
one per statement), else as a transaction. While it follows the log it writes
on one connection it holds (no pool reset after each write). A message at or
below the stored position is skipped, so a redelivery changes nothing, and a
restarted projector refolds the log up to its position before it writes again.
From the log it folds only the events each message's subject may carry
(`eventlog.envelope.admitted`), as every service does.

Given a `feed` (a share of a fold the process runs anyway, `qm up`), it reads
no log of its own once it stands where the fold stands: the fold's listener
hands it each message already decoded. A gap (a start or retry behind the
fold) is read from the log first; a feed queue past `FEED_LIMIT` messages (a
database down) is dropped and the projection retries from its position.

Under load it gathers: at most one transaction per `interval` seconds (the
messages that arrive meanwhile go in the next one), while an idle projector
writes a message at once, so a read after a lone write waits no longer.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NamedTuple, Protocol

from quartermaster.bus.errors import TransientBusError
from quartermaster.core import State, fold
from quartermaster.core.replay import replaying
from quartermaster.eventlog.envelope import admitted
from quartermaster.events import AnyEvent
from quartermaster.store import combined, rows
from quartermaster.store.changes import Changes
from quartermaster.store.errors import (
    PermanentStoreError,
    PositionTimeoutError,
    ProjectionAheadOfLogError,
    TransientStoreError,
    store_error,
)
from quartermaster.store.schema import channel, checked, create_schema

log = logging.getLogger(__name__)

FEED_LIMIT = 100_000  # messages a fed projector may fall behind before it lets go


class Batch(NamedTuple):
    """One log message: its stream sequence, subject and decoded events."""

    seq: int
    subject: str
    events: list[AnyEvent]


class EventLog(Protocol):
    """What the projector reads: `JetStreamLog` fits."""

    @property
    def prefix(self) -> str: ...
    def read(self, from_seq: int = 1, until_seq: int | None = None) -> AsyncIterator[Any]: ...
    async def last_seq(self) -> int: ...


class Feed(Protocol):
    """A fold that hands on every message it folds: a `LogFollower` share fits."""

    @property
    def seq(self) -> int: ...
    def listen(self, listener: Callable[[int, str, list[AnyEvent]], None]) -> None: ...
    async def stop(self) -> None: ...


class _Sql:
    def __init__(self, s: str) -> None:
        created = "COALESCE($2::float8, $3::float8)"
        kept = "COALESCE($2::float8, t.created_at)"

        def stamped(created_at: str, doc: str) -> str:
            ms = f"round({created_at} * 1000)::bigint"
            return f"{doc}::jsonb || jsonb_build_object('created_at', {ms})"

        def config(table: str) -> str:
            return (
                f"INSERT INTO {s}.{table} AS t (name, created_at, updated_seq, doc) "
                f"VALUES ($1, {created}, $4, {stamped(created, '$5')}) "
                f"ON CONFLICT (name) DO UPDATE SET created_at = {kept}, "
                f"updated_seq = EXCLUDED.updated_seq, doc = {stamped(kept, '$5')}"
            )

        self.ensure_position = (
            f"INSERT INTO {s}.projection_position (name) VALUES ($1) ON CONFLICT DO NOTHING"
        )
        self.position = f"SELECT seq FROM {s}.projection_position WHERE name = $1"
        self.lock_position = self.position + " FOR UPDATE"
        # The new position and its notification in one round trip.
        self.set_position = (
            f"WITH moved AS (UPDATE {s}.projection_position SET seq = $2, at = $3 "
            "WHERE name = $1 RETURNING seq) SELECT pg_notify($4, $5) FROM moved"
        )
        self.jobs = (
            f"INSERT INTO {s}.jobs AS t (job_id, job_name, job_queue, quota_share, status, "
            "status_reason, scheduling_priority, created_at, updated_seq, summary, doc) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::jsonb) "
            "ON CONFLICT (job_id) DO UPDATE SET job_name = EXCLUDED.job_name, "
            "job_queue = EXCLUDED.job_queue, quota_share = EXCLUDED.quota_share, "
            "status = EXCLUDED.status, status_reason = EXCLUDED.status_reason, "
            "scheduling_priority = EXCLUDED.scheduling_priority, "
            "created_at = EXCLUDED.created_at, updated_seq = EXCLUDED.updated_seq, "
            "summary = EXCLUDED.summary, doc = EXCLUDED.doc"
        )
        self.attempts = (
            f"INSERT INTO {s}.attempts (job_id, attempt, hosts, dispatched_at, started_at, "
            "stopped_at, status_reason, exit_code) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
            "ON CONFLICT (job_id, attempt) DO UPDATE SET hosts = EXCLUDED.hosts, "
            "dispatched_at = EXCLUDED.dispatched_at, started_at = EXCLUDED.started_at, "
            "stopped_at = EXCLUDED.stopped_at, status_reason = EXCLUDED.status_reason, "
            "exit_code = EXCLUDED.exit_code"
        )
        self.pools = (
            f"INSERT INTO {s}.pools (job_id, status, job_queue, updated_seq, doc) "
            "VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT (job_id) DO UPDATE SET "
            "status = EXCLUDED.status, job_queue = EXCLUDED.job_queue, "
            "updated_seq = EXCLUDED.updated_seq, doc = EXCLUDED.doc"
        )
        self.hosts = (
            f"INSERT INTO {s}.hosts (host_id, updated_seq, doc) VALUES ($1, $2, $3::jsonb) "
            "ON CONFLICT (host_id) DO UPDATE SET updated_seq = EXCLUDED.updated_seq, "
            "doc = EXCLUDED.doc"
        )
        self.environments = config("environments")
        self.policies = config("policies")
        self.queues = config("queues")
        share_created = "COALESCE($3::float8, $4::float8)"
        share_kept = "COALESCE($3::float8, t.created_at)"
        self.shares = (
            f"INSERT INTO {s}.shares AS t (job_queue, name, created_at, updated_seq, "
            "oversubscribed, capacity_usage, doc) "
            f"VALUES ($1, $2, {share_created}, $5, $6, $7::jsonb, "
            f"{stamped(share_created, '$8')}) "
            f"ON CONFLICT (job_queue, name) DO UPDATE SET created_at = {share_kept}, "
            "updated_seq = EXCLUDED.updated_seq, oversubscribed = EXCLUDED.oversubscribed, "
            f"capacity_usage = EXCLUDED.capacity_usage, doc = {stamped(share_kept, '$8')}"
        )
        self.share_deletes = f"DELETE FROM {s}.shares WHERE job_queue = $1 AND name = $2"
        self.environment_deletes = f"DELETE FROM {s}.environments WHERE name = $1"
        self.policy_deletes = f"DELETE FROM {s}.policies WHERE name = $1"
        self.queue_deletes = f"DELETE FROM {s}.queues WHERE name = $1"
        self.audit = (
            f"INSERT INTO {s}.audit (seq, idx, subject, type, at, body, principal) "
            "VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7) ON CONFLICT DO NOTHING"
        )


class Projector:
    """Projects the log into the tables of `schema`, tracking its position as `name`."""

    def __init__(
        self,
        pool: Any,
        schema: str,
        name: str = "main",
        *,
        group: int = 256,
        interval: float = 0.02,
    ):
        self.pool = pool
        self.schema = checked(schema)
        self.name = name
        self.state = State()
        self._sql = _Sql(self.schema)
        self._channel = channel(self.schema)
        self._group = group  # most log messages folded into one transaction
        self._interval = interval  # under load, at most one transaction this often
        self._last_write = -interval  # loop time the last transaction began
        self.transactions = 0  # committed (benchmarks)
        self._folded = 0  # last seq folded into `state`
        self._committed = 0  # last seq known to be in the tables
        self._pending: rows.Writes | None = None  # folded, not yet committed
        self._written: dict[rows.ConfigKey, str] = {}
        self._combined: dict[tuple[str, ...], str] = {}  # statement by the tables it writes
        self._held: Any = None  # the connection `run` writes on (None: one from the pool each time)
        self._prepared = False
        self._advanced = asyncio.Condition()

    @property
    def seq(self) -> int:
        """The last log position this projector committed (or found committed)."""
        return self._committed

    # ---- position ------------------------------------------------------------------

    async def prepare(self) -> int:
        """Create the schema and the tracking record if missing; return the stored position."""
        try:
            await create_schema(self.pool, self.schema)
            async with self.pool.acquire() as conn:
                await conn.execute(self._sql.ensure_position, self.name)
        except Exception as err:
            raise store_error(err, f"prepare schema {self.schema}") from err
        self._prepared = True
        return await self.position()

    async def position(self) -> int:
        """The position stored in `projection_position` (0 before the first write)."""
        try:
            async with self.pool.acquire() as conn:
                stored = await conn.fetchval(self._sql.position, self.name)
        except Exception as err:
            raise store_error(err, "read the projection position") from err
        return int(stored or 0)

    async def wait_for(self, seq: int, timeout: float | None = 10.0) -> None:
        """Return once this projector has committed everything up to `seq`."""
        async with self._advanced:
            try:
                async with asyncio.timeout(timeout):  # not wait_for: see LogFollower.wait_for
                    await self._advanced.wait_for(lambda: self._committed >= seq)
            except TimeoutError as err:
                raise PositionTimeoutError(
                    f"projection {self.name} at {self._committed}, not at {seq} after {timeout}s"
                ) from err

    # ---- applying ------------------------------------------------------------------

    async def apply(self, seq: int, subject: str, events: list[AnyEvent]) -> None:
        """Fold one log message and commit its rows with the position `seq`."""
        await self.apply_many([Batch(seq, subject, events)])

    async def apply_many(self, batches: Sequence[Batch]) -> None:
        """Fold consecutive log messages and commit all their rows in one transaction."""
        if not self._prepared:
            await self.prepare()
        if self._pending is not None:
            await self._flush()  # an earlier transaction failed: its rows go first
        fresh = [b for b in batches if b.seq > self._folded]
        if not fresh:
            return
        changes = Changes()
        audit: list[rows.Row] = []
        for batch in fresh:
            changes.before_fold(self.state, batch.events)
            for event in batch.events:
                fold(self.state, event)
            self._folded = batch.seq
            audit.extend(rows.audit_rows(batch.seq, batch.subject, batch.events))
        changes.after_fold(self.state)
        self._pending = rows.build(self.state, changes, self._folded, audit, self._written)
        await self._flush()

    async def _pace(self, waiting: int) -> None:
        """Let messages gather for the next transaction if the last one began less than
        `interval` ago (and a group is not full yet)."""
        loop = asyncio.get_running_loop()
        wait = self._last_write + self._interval - loop.time()
        if waiting < self._group and wait > 0:
            await asyncio.sleep(wait)

    async def _flush(self) -> None:
        writes = self._pending
        assert writes is not None
        self._last_write = asyncio.get_running_loop().time()
        try:
            if combined.fits(writes):
                written, stored = await self._write_combined(writes)
            else:
                written, stored = await self._write_transaction(writes)
        except Exception as err:
            if _cancelling():  # the clean-up of a cancelled write failed: stay cancelled
                raise asyncio.CancelledError from err
            raise store_error(err, f"write projection {self.name} at seq {writes.seq}") from err
        self.transactions += 1
        if written:
            self._written.update(writes.remember)
            for key in writes.forget:
                self._written.pop(key, None)
        else:  # someone else wrote this far: what we last wrote is no longer known
            self._written.clear()
        self._pending = None
        async with self._advanced:
            self._committed = max(writes.seq, stored)
            self._advanced.notify_all()

    async def _write_combined(self, writes: rows.Writes) -> tuple[bool, int]:
        """One statement (see `combined`); (whether it wrote, the stored position if not)."""
        tables = combined.tables_of(writes)
        key = tuple(t.name for t in tables)
        statement = self._combined.get(key)
        if statement is None:
            statement = self._combined[key] = combined.statement(self.schema, tables)
        async with self._connection() as conn:
            notified = await conn.fetch(
                statement,
                self.name,
                writes.seq,
                writes.at,
                self._channel,
                f"{self.name}:{writes.seq}",
                *combined.arguments(tables, writes),
            )
            if notified:
                return True, 0
            return False, int(await conn.fetchval(self._sql.position, self.name) or 0)

    async def _write_transaction(self, writes: rows.Writes) -> tuple[bool, int]:
        """Every row in one transaction of a statement per table, the position row locked."""
        sql = self._sql
        async with self._connection() as conn, conn.transaction():
            stored = int(await conn.fetchval(sql.lock_position, self.name) or 0)
            written = stored < writes.seq
            if written:
                for statement, args in (
                    (sql.jobs, writes.jobs),
                    (sql.attempts, writes.attempts),
                    (sql.pools, writes.pools),
                    (sql.hosts, writes.hosts),
                    (sql.environments, writes.environments),
                    (sql.policies, writes.policies),
                    (sql.queues, writes.queues),
                    (sql.shares, writes.shares),
                    (sql.share_deletes, writes.share_deletes),
                    (sql.environment_deletes, writes.environment_deletes),
                    (sql.policy_deletes, writes.policy_deletes),
                    (sql.queue_deletes, writes.queue_deletes),
                    (sql.audit, writes.audit),
                ):
                    if args:
                        await conn.executemany(statement, args)
                await conn.execute(
                    sql.set_position,
                    self.name,
                    writes.seq,
                    writes.at,
                    self._channel,
                    f"{self.name}:{writes.seq}",
                )
        return written, stored

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        if self._held is not None:
            yield self._held
        else:
            async with self.pool.acquire() as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def _holding(self) -> AsyncIterator[None]:
        """Write on one connection while following the log: a connection from the pool
        for each write costs the pool's reset (a round trip) when it goes back."""
        try:
            conn = await self.pool.acquire()
        except Exception as err:
            raise store_error(err, f"connect projection {self.name}") from err
        self._held = conn
        try:
            yield
        finally:
            self._held = None
            try:
                await self.pool.release(conn)
            except Exception:  # a broken connection: the pool replaces it
                log.debug("projection %s: releasing its connection failed", self.name)

    # ---- following the log ---------------------------------------------------------

    async def rebuild(self, event_log: EventLog) -> int:
        """Fold the log up to the stored position without writing; return that position."""
        stored = await self.prepare()
        if self._pending is None and self._folded > stored:
            log.warning(
                "projection %s behind its state (%d < %d); refolding",
                self.name,
                stored,
                self._folded,
            )
            self.state, self._folded, self._written = State(), 0, {}
        if self._folded < stored:
            prefix = event_log.prefix
            last = await event_log.last_seq()
            if last < stored:
                raise ProjectionAheadOfLogError(
                    f"projection {self.name} is at seq {stored} but the log ends at {last}"
                )
            # A replay (`core.replay`): nothing reads the state until it is done.
            with replaying(self.state):
                async with _closing(event_log.read(self._folded + 1, stored)) as entries:
                    async for entry in entries:
                        for event in admitted(entry.seq, entry.subject, entry.data, prefix):
                            fold(self.state, event)
                        self._folded = entry.seq
                        if entry.seq >= stored:
                            break
            log.info("projection %s refolded the log up to seq=%d", self.name, stored)
        async with self._advanced:
            self._committed = max(self._committed, stored)
            self._advanced.notify_all()
        return stored

    async def run(
        self,
        event_log: EventLog,
        *,
        retry_delay: float = 0.5,
        feed: Callable[[], Feed] | None = None,
    ) -> None:
        """Rebuild, then follow the log live until cancelled (from `feed()`, a fresh
        share of a fold, on each try: see the module's doc).

        Transient failures (database, reader) are retried with backoff from where the
        projection stands; a permanent store error ends the run.
        """
        delay = retry_delay
        while True:
            try:
                async with self._holding():
                    if self._pending is not None:
                        await self._flush()
                    await self.rebuild(event_log)
                    delay = retry_delay
                    if feed is None:
                        await self._follow(event_log)
                    else:
                        await self._follow_fed(event_log, feed())
            except asyncio.CancelledError:
                raise
            except PermanentStoreError:
                raise
            except (TransientStoreError, TransientBusError, TimeoutError, ConnectionError) as err:
                log.warning(  # routine (a restart, a NATS leader change): one line
                    "projection %s failed at seq=%d (%s); retrying",
                    self.name,
                    self._folded,
                    err or type(err).__name__,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
            except Exception:
                log.exception("projection %s failed at seq=%d; retrying", self.name, self._folded)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def _follow(self, event_log: EventLog) -> None:
        prefix = event_log.prefix
        entries: asyncio.Queue[Any] = asyncio.Queue(maxsize=4 * self._group)

        async def pump() -> None:
            async with _closing(event_log.read(self._folded + 1)) as reader:
                async for entry in reader:
                    await entries.put(entry)

        reader = asyncio.create_task(pump(), name=f"projection-{self.name}-reader")
        getter: asyncio.Future[Any] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(entries.get())
                await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    reader.result()  # raises what stopped the reader
                    raise TransientStoreError("the log reader stopped following the log")
                group = [getter.result()]
                await self._pace(1 + entries.qsize())
                while len(group) < self._group and not entries.empty():
                    group.append(entries.get_nowait())
                await self.apply_many(
                    [
                        Batch(e.seq, e.subject, admitted(e.seq, e.subject, e.data, prefix))
                        for e in group
                    ]
                )
        finally:
            if getter is not None:
                getter.cancel()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def _follow_fed(self, event_log: EventLog, feed: Feed) -> None:
        queued: collections.deque[Batch] = collections.deque()
        woken = asyncio.Event()

        def hand_on(seq: int, subject: str, events: list[AnyEvent]) -> None:
            queued.append(Batch(seq, subject, events))
            woken.set()

        feed.listen(hand_on)  # from the fold's next message on; before it, the log
        try:
            reached = feed.seq
            if self._folded < reached:
                await self._read_gap(event_log, reached)
            while True:
                await woken.wait()
                await self._pace(len(queued))
                woken.clear()
                if len(queued) > FEED_LIMIT:
                    raise TransientStoreError(
                        f"projection {self.name} fell {len(queued)} messages behind its feed"
                    )
                while queued:
                    group = [queued.popleft() for _ in range(min(self._group, len(queued)))]
                    await self.apply_many(group)
        finally:
            await feed.stop()

    async def _read_gap(self, event_log: EventLog, until: int) -> None:
        """Apply what the log holds after this projection up to `until`, in groups."""
        prefix = event_log.prefix
        group: list[Batch] = []
        async with _closing(event_log.read(self._folded + 1, until)) as entries:
            async for e in entries:
                group.append(Batch(e.seq, e.subject, admitted(e.seq, e.subject, e.data, prefix)))
                if len(group) >= self._group or e.seq >= until:
                    await self.apply_many(group)
                    group = []
                if e.seq >= until:
                    break
        if group:
            await self.apply_many(group)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@contextlib.asynccontextmanager
async def _closing(entries: AsyncIterator[Any]) -> AsyncIterator[AsyncIterator[Any]]:
    """Close a log reader (an async generator) on leaving, so its consumer goes at once."""
    try:
        yield entries
    finally:
        aclose = getattr(entries, "aclose", None)
        if aclose is not None:
            await aclose()
