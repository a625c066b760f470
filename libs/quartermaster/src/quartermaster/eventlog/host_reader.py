"""A node agent's read side: its host's views from the feed, not the whole log.

Same face as `LogFollower` where the agent uses it (`state`, `seq`, `traces`,
`listen`, `start`, `stop`, `catch_up`): `state` holds only this host's entries
(`host_feed.as_state`), `seq` is the log position the newest view was derived
at. The feed keeps one view per host, so a restarted agent reads its newest
view and goes on from there: nothing to replay, nothing missed (a view is the
whole of what the log wants from the host, not a delta). Views older than the
one it holds (a lagging publisher after a takeover) are skipped.

Each view also comes at once on the host's unstored subject (`bus.feed.fast_subject`),
before the feed has replicated it; whichever copy comes second is the same bytes and is
skipped. A view missed there (a reconnect) still comes from the feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import msgspec
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from quartermaster.bus import JetStreamLog, TransientBusError
from quartermaster.bus.feed import fast_subject, feed_stream, feed_subject
from quartermaster.bus.reader import OrderedReader
from quartermaster.bus.translate import NATS_FAILURES, bus_error
from quartermaster.cancelling import cancel_and_wait
from quartermaster.core import State
from quartermaster.eventlog.host_feed import as_state, decode_view
from quartermaster.events import AnyEvent

log = logging.getLogger(__name__)

Listener = Callable[[int, str, list[AnyEvent]], Awaitable[None] | None]


class ViewTraces:
    """The trace context of each job of the newest view (`JobTraces.get`'s face)."""

    def __init__(self) -> None:
        self.latest: dict[str, str] = {}

    def get(self, job_id: str) -> str | None:
        return self.latest.get(job_id)


class HostFeedFollower:
    def __init__(self, event_log: JetStreamLog, host_id: str) -> None:
        self.log = event_log
        self.host_id = host_id
        self.subject = feed_subject(host_id, event_log.prefix)
        self.state = State()
        self.seq = 0
        self.traces = ViewTraces()
        self.messages_read = 0  # every message delivered to this reader, stale ones included
        self._stream_seq = 0  # the feed stream's position (not the log's)
        self._reader: OrderedReader | None = None
        self._listeners: list[Listener] = []
        self._advanced = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._fast: Subscription | None = None
        self._applying = asyncio.Lock()  # the feed's copy and the fast one, one at a time
        self._applied = b""  # the view last applied, as sent

    def listen(self, listener: Listener, *, first: bool = False) -> None:
        if first:
            self._listeners.insert(0, listener)
        else:
            self._listeners.append(listener)

    async def start(self) -> None:
        subject = fast_subject(self.host_id, self.log.prefix)
        try:
            self._fast = await self.log.nc.subscribe(subject, cb=self._on_fast)
        except NATS_FAILURES as err:
            raise bus_error(err, f"subscribe to {subject}") from err
        self._task = asyncio.create_task(self._run(), name=f"host-feed {self.host_id}")

    async def stop(self) -> None:
        fast, self._fast = self._fast, None
        if fast is not None:
            with contextlib.suppress(*NATS_FAILURES):  # a connection already gone
                await fast.unsubscribe()
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task, again_after=1.0)

    async def _on_fast(self, msg: Msg) -> None:
        await self._apply(msg.data)

    @property
    def reader(self) -> asyncio.Task[None] | None:
        """The task that reads the feed (None: not started or stopped)."""
        return self._task

    @property
    def feed_seq(self) -> int:
        """The feed stream's position of the newest view read (not the log's `seq`)."""
        return self._stream_seq

    async def feed_end(self) -> int:
        """Where on the feed this reader must be to hold the newest view: `feed_seq`
        when the server has nothing more for it, past it otherwise (the feed keeps one
        view per host, so reading the next is all it takes). For health checks."""
        reader = self._reader
        if reader is not None and await reader.caught_up():
            return self._stream_seq
        return self._stream_seq + 1

    async def catch_up(self, timeout: float | None = 10.0) -> int:
        """Return once the view the feed holds now (if any) is applied; returns `seq`."""
        async with asyncio.timeout(timeout):
            while True:
                reader = self._reader
                if reader is not None and await reader.caught_up():
                    return self.seq
                await asyncio.sleep(0.02)

    async def wait_for(self, seq: int, timeout: float | None = 10.0) -> None:
        async with self._advanced, asyncio.timeout(timeout):  # not wait_for: see LogFollower
            await self._advanced.wait_for(lambda: self.seq >= seq)

    async def _run(self) -> None:
        js = self.log.js
        while True:
            reader = OrderedReader(
                self.log.nc,
                js,
                feed_stream(self.log.stream),
                self.subject,
                self._stream_seq + 1,
                named=True,
            )
            try:
                await reader.start()
                self._reader = reader
                while True:
                    delivered = await reader.next(timeout=None)
                    if delivered is not None:
                        self._stream_seq = delivered.seq
                        await self._apply(delivered.data)
            except asyncio.CancelledError:
                raise
            except (TransientBusError, TimeoutError, ConnectionError) as err:
                log.warning("host=%s feed reader lost (%s); resuming", self.host_id, err)
                await asyncio.sleep(0.5)
            except Exception:
                log.exception("host=%s feed reader failed; resuming", self.host_id)
                await asyncio.sleep(0.5)
            finally:
                self._reader = None
                await reader.stop()

    async def _apply(self, data: bytes) -> None:
        self.messages_read += 1
        async with self._applying:
            await self._apply_view(data)

    async def _apply_view(self, data: bytes) -> None:
        if data == self._applied:
            return  # the other copy of the view applied last
        try:
            view = decode_view(data)
        except msgspec.DecodeError as err:
            log.error("host=%s undecodable view skipped: %s", self.host_id, err)
            return
        if view.host_id != self.host_id or view.seq < self.seq:
            return  # another host's (misrouted) or older than the one applied
        self._applied = data
        self.state = as_state(view)
        self.seq = view.seq
        self.traces.latest = dict(view.traces)
        for listener in self._listeners:
            try:
                result = listener(view.seq, self.subject, [])
                if result is not None:
                    await result
            except Exception:
                log.exception("listener failed on view seq=%d", view.seq)
        async with self._advanced:
            self._advanced.notify_all()
