"""Appends a clock tick whenever a pool expires or an attempt's deadline passes.

The scheduler's pass turns those ticks into `WarmPoolTerminated(EXPIRED)` and
`JobTimedOut` decisions, with billable seconds computed from the log's times,
so a replay gives the same bill.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time

from qm_warmpool.settings import WarmPoolSettings
from qm_warmpool.timers import next_due, tick_id
from quartermaster.bus import BusError, JetStreamLog, TransientBusError
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.events import AnyEvent, ClockTicked

log = logging.getLogger("qm.warmpool")


class WarmPoolService:
    def __init__(
        self,
        settings: WarmPoolSettings,
        event_log: JetStreamLog,
        follower: LogFollower | None = None,  # a share of the process's fold (`qm up`)
    ) -> None:
        self.settings = settings
        self.log = event_log
        if follower is None:  # its own fold, which it may read in batches
            follower = LogFollower(event_log)
            follower.pace(settings.read_interval_seconds)
        self.follower = follower
        self._changed = asyncio.Event()
        self._due = math.inf  # the instant being waited for (inf: not waiting)
        self.ticks = 0

    def _on_batch(self, seq: int, subject: str, events: list[AnyEvent]) -> None:
        # Only a nearer due instant wakes the loop (most messages move no timer).
        now = time.time()
        if next_due(self.follower.state, now, self.settings.tick_seconds) < self._due:
            self._changed.set()

    async def run(self) -> None:
        self.follower.listen(self._on_batch)
        await self.follower.start()
        try:
            await self.follower.catch_up(timeout=None)
            while True:
                due = next_due(self.follower.state, time.time(), self.settings.tick_seconds)
                delay = max(0.0, due - time.time())
                self._changed.clear()
                self._due = due
                try:
                    # asyncio.timeout, not wait_for: 3.11's wait_for drops a cancellation
                    # that comes as the event is set, and the loop would go on after it.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await self._changed.wait()
                        continue  # a nearer timer exists
                finally:
                    self._due = math.inf
                await self._tick(due)
        finally:
            await self.follower.stop()

    async def _tick(self, due: float) -> None:
        at = max(due, time.time())
        data = encode_batch([ClockTicked(at=at)])
        try:
            seq = await self.log.append(subjects.timers(self.log.prefix), data, msg_id=tick_id(due))
            await self.follower.wait_for(seq)
            self.ticks += 1
        except (TransientBusError, TimeoutError) as err:  # routine: one line
            log.warning("tick at %.3f failed (%s); retrying", due, err or type(err).__name__)
            await asyncio.sleep(0.5)
        except BusError:
            log.exception("tick at %.3f failed; retrying", due)
            await asyncio.sleep(0.5)
