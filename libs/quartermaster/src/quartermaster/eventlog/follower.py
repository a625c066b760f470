"""Follows the log and folds it: the read side every service shares.

A follower reads the stream in order (ordered consumer), folds every
envelope into its State, and wakes whoever waits for a position. Services
react to new batches through listeners, which run after the fold. Only the
events a message's subject may carry are folded and passed on (`admitted`).
With tracing on, `traces` holds each job's newest trace context (`JobTraces`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from quartermaster.bus import JetStreamLog, TransientBusError
from quartermaster.core import State, fold
from quartermaster.core.snapshot import restore
from quartermaster.eventlog.envelope import admitted
from quartermaster.eventlog.job_traces import JobTraces
from quartermaster.events import AnyEvent
from quartermaster.telemetry import traces

log = logging.getLogger(__name__)

Listener = Callable[[int, str, list[AnyEvent]], Awaitable[None] | None]


class LogFollower:
    def __init__(self, event_log: JetStreamLog, snapshot: bytes | None = None) -> None:
        self.log = event_log
        if snapshot is not None:
            self.state, self.seq = restore(snapshot)
        else:
            self.state, self.seq = State(), 0
        self.last_on_subject: dict[str, int] = {}
        self.traces = JobTraces()
        self._listeners: list[Listener] = []
        self._advanced = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="log-follower")

    async def stop(self) -> None:
        task, self._task = self._task, None
        while task is not None and not task.done():
            task.cancel()  # again if a cancel was swallowed by a library wait
            await asyncio.wait({task}, timeout=1.0)
        if task is not None and not task.cancelled() and task.exception() is not None:
            log.error("log follower ended with %r", task.exception())

    async def _run(self) -> None:
        while True:
            try:
                async for entry in self.log.read(from_seq=self.seq + 1):
                    await self._apply(entry.seq, entry.subject, entry.data, entry.headers)
            except asyncio.CancelledError:
                raise
            except (TransientBusError, TimeoutError, ConnectionError) as err:  # routine
                log.warning(
                    "log follower lost its reader at seq %d (%s); resuming",
                    self.seq,
                    err or type(err).__name__,
                )
                await asyncio.sleep(0.5)
            except Exception:  # the reader died otherwise: resume after a pause
                log.exception(
                    "log follower lost its reader at seq %d; resuming",
                    self.seq,
                    extra={"seq": self.seq},
                )
                await asyncio.sleep(0.5)

    async def _apply(
        self, seq: int, subject: str, data: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        if seq <= self.seq:
            return
        events = admitted(seq, subject, data, self.log.prefix)
        if traces.enabled():
            self.traces.note_message(data, headers)
        for event in events:
            fold(self.state, event)
        self.seq = seq
        self.last_on_subject[subject] = seq
        for listener in self._listeners:
            try:
                result = listener(seq, subject, events)
                if result is not None:
                    await result
            except Exception:
                log.exception("listener failed on seq=%d", seq, extra={"seq": seq})
        async with self._advanced:
            self._advanced.notify_all()

    async def wait_for(self, seq: int, timeout: float | None = 10.0) -> None:
        """Return once everything up to `seq` is folded."""
        async with self._advanced:
            await asyncio.wait_for(self._advanced.wait_for(lambda: self.seq >= seq), timeout)

    async def catch_up(self, timeout: float | None = 10.0) -> int:
        """Fold everything the stream holds right now; returns that position."""
        target = await self.log.last_seq()
        await self.wait_for(target, timeout)
        return target
