"""Waiting for a projection to reach a log position: read-your-writes for any process.

A projector notifies `<schema>_position` with `name:seq` in the transaction that
stores its position, so a waiter wakes when that transaction commits. One
listening connection serves every waiter; each waiter also re-reads the stored
position now and then, so a lost notification or connection only costs latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from quartermaster.store.errors import PositionTimeoutError, store_error
from quartermaster.store.schema import channel, checked

log = logging.getLogger(__name__)


class PositionWatch:
    def __init__(
        self, pool: Any, schema: str, projection: str = "main", poll_interval: float = 0.5
    ) -> None:
        self.pool = pool
        self.projection = projection
        self.poll_interval = poll_interval
        self._schema = checked(schema)
        self._channel = channel(self._schema)
        self._query = f"SELECT seq, at FROM {self._schema}.projection_position WHERE name = $1"
        self._known = 0
        self._moved = asyncio.Event()
        self._conn: Any = None
        self._listening = asyncio.Lock()

    async def read(self) -> tuple[int, float]:
        """The stored (position, state time) of the projection; (0, 0.0) before it wrote."""
        try:
            async with self.pool.acquire() as conn:
                row = await conn.fetchrow(self._query, self.projection)
        except Exception as err:
            raise store_error(err, "read the projection position") from err
        seq, at = (int(row["seq"]), float(row["at"])) if row is not None else (0, 0.0)
        self._advance(seq)
        return seq, at

    async def position(self) -> int:
        return (await self.read())[0]

    async def wait_for(self, seq: int, timeout: float | None = 10.0) -> int:
        """Return the position once it is at least `seq`; PositionTimeoutError otherwise."""
        if self._known >= seq:
            return self._known
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        await self._listen()
        await self.read()  # after LISTEN: a commit in between is not missed
        while self._known < seq:
            moved = self._moved
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise PositionTimeoutError(
                    f"projection {self.projection} at {self._known}, not at {seq} after {timeout}s"
                )
            wait = self.poll_interval if remaining is None else min(self.poll_interval, remaining)
            try:
                async with asyncio.timeout(wait):  # not wait_for: see LogFollower.wait_for
                    await moved.wait()
            except TimeoutError:
                await self.read()
        return self._known

    async def close(self) -> None:
        async with self._listening:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.remove_listener(self._channel, self._on_notify)
                await self.pool.release(conn)

    async def _listen(self) -> None:
        async with self._listening:
            if self._conn is not None and not self._conn.is_closed():
                return
            if self._conn is not None:  # the listening connection broke: hand it back
                conn, self._conn = self._conn, None
                with contextlib.suppress(Exception):
                    await self.pool.release(conn)
            try:
                self._conn = await self.pool.acquire()
                await self._conn.add_listener(self._channel, self._on_notify)
            except Exception:  # polling still works; the next wait tries again
                log.warning("cannot LISTEN on %s; polling", self._channel, exc_info=True)
                conn, self._conn = self._conn, None
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await self.pool.release(conn)

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        name, _, seq = payload.rpartition(":")
        if name == self.projection and seq.isdigit():
            self._advance(int(seq))

    def _advance(self, seq: int) -> None:
        if seq > self._known:
            self._known = seq
            self._moved.set()
            self._moved = asyncio.Event()
