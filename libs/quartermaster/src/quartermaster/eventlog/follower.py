"""Follows the log and folds it: the read side every service shares.

A follower reads the stream in order (ordered consumer), folds every
envelope into its State, and wakes whoever waits for a position. Services
react to new batches through listeners, which run after the fold. Only the
events a message's subject may carry are folded and passed on (`admitted`).
With tracing on, `traces` holds each job's newest trace context (`JobTraces`).

A follower that needs the log only to within a fraction of a second (the warm pool's
timers, a scheduler standing by) can `pace` its reads: it then asks every interval
for what was stored since its last read (`JetStreamLog.read_stored`, a batch per
request), instead of being sent each message as it is stored. On this kind of
reader most of the cost of a message is the wake-up it brings (a TLS record, a
socket read, a loop turn), which a batch shares. A wait for a position (`wait_for`,
`catch_up`) reads at once; `pace(None)` goes back to being sent each message.

Several services in one process (`qm up`) can share one fold: `share()` gives
each a follower of its own over the same state and position, with its own
connection (`log`, for appends and `last_seq`) and its own listeners, which
join the fold at once and leave it at `stop()`. Only the follower that made
the fold reads the log; a share's `start()` and `stop()` leave the reader alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

from quartermaster.bus import JetStreamLog, TransientBusError
from quartermaster.cancelling import cancel_and_wait
from quartermaster.core import State, fold
from quartermaster.core.snapshot import restore
from quartermaster.eventlog.envelope import admitted
from quartermaster.eventlog.job_traces import JobTraces
from quartermaster.events import AnyEvent
from quartermaster.telemetry import traces

log = logging.getLogger(__name__)

PACED_BATCH = 1000  # messages per paced read (a longer backlog takes several at once)
PACED_RETRY_S = 0.005  # a paced read short of a position waited for asks again this soon

Listener = Callable[[int, str, list[AnyEvent]], Awaitable[None] | None]


class _Fold:
    """The folded log and who hears of it: one per reader, shared by its shares."""

    def __init__(self, state: State, seq: int) -> None:
        self.state = state
        self.seq = seq
        self.last_on_subject: dict[str, int] = {}
        self.traces = JobTraces()
        self.listeners: list[Listener] = []
        self.advanced = asyncio.Condition()
        # What the server still had for the reader when it sent the newest folded
        # message (None: unknown, e.g. nothing read yet or the reader was lost).
        self.pending: int | None = None
        self.reader: asyncio.Task[None] | None = None  # the reading follower's task
        # Paced reads: the interval between them (None: each message is sent), and
        # what wakes the reader early (a new interval, a wait for a position).
        self.interval: float | None = None
        self.poke = asyncio.Event()
        self.wanted = 0  # the highest position waited for
        self.waiting = 0  # waits for a position under way


class LogFollower:
    def __init__(self, event_log: JetStreamLog, snapshot: bytes | None = None) -> None:
        self.log = event_log
        state, seq = restore(snapshot) if snapshot is not None else (State(), 0)
        self._fold = _Fold(state, seq)
        self._reads = True  # False: a share of another follower's fold
        self._own: list[Listener] = []  # the listeners this follower added
        self._task: asyncio.Task[None] | None = None

    def share(self, event_log: JetStreamLog | None = None) -> LogFollower:
        """A follower over this one's fold (state, position, waits) with its own
        listeners and connection (`event_log`; None: this one's)."""
        shared = LogFollower.__new__(LogFollower)
        shared.log = self.log if event_log is None else event_log
        shared._fold = self._fold
        shared._reads = False
        shared._own = []
        shared._task = None
        return shared

    # The fold's fields; setting them (a snapshot restore) is for a reader before start.
    @property
    def state(self) -> State:
        return self._fold.state

    @state.setter
    def state(self, state: State) -> None:
        self._fold.state = state

    @property
    def seq(self) -> int:
        return self._fold.seq

    @seq.setter
    def seq(self, seq: int) -> None:
        self._fold.seq = seq

    @property
    def last_on_subject(self) -> dict[str, int]:
        return self._fold.last_on_subject

    @property
    def traces(self) -> JobTraces:
        return self._fold.traces

    @property
    def reader(self) -> asyncio.Task[None] | None:
        """The task that reads and folds the log, a share's included (None: not started,
        or stopped): a share's health is its fold's."""
        return self._fold.reader

    @property
    def shared(self) -> bool:
        """Whether this follower is a share of another's fold (it reads nothing)."""
        return not self._reads

    def listen(self, listener: Listener, *, first: bool = False) -> None:
        """Call `listener` after each folded message; `first`: before those already
        listening (a node agent's launch then starts before the pass, the projection
        and the watches that the same message wakes in a process sharing the fold)."""
        self._own.append(listener)
        if first:
            self._fold.listeners.insert(0, listener)
        else:
            self._fold.listeners.append(listener)

    def pace(self, interval: float | None) -> None:
        """Read what was stored every `interval` seconds (None or 0: be sent each message).
        Switching to being sent takes effect at once; switching to paced reads, at the
        next message (a quiet log costs nothing either way). Only for a follower that
        reads: a share follows its fold's pace."""
        if not self._reads:
            raise RuntimeError("a share of a fold cannot pace its reads")
        folded = self._fold
        folded.interval = interval or None
        folded.poke.set()

    @property
    def paced(self) -> bool:
        return self._fold.interval is not None

    async def start(self) -> None:
        if self._reads:
            self._task = self._fold.reader = asyncio.create_task(self._run(), name="log-follower")

    async def stop(self) -> None:
        listeners = self._fold.listeners
        for listener in self._own:
            if listener in listeners:
                listeners.remove(listener)
        self._own.clear()
        task, self._task = self._task, None
        if task is not None:
            self._fold.reader = None
            await cancel_and_wait(task, again_after=1.0)
            if not task.cancelled() and task.exception() is not None:
                log.error("log follower ended with %r", task.exception())

    async def _run(self) -> None:
        while True:
            try:
                if self._fold.interval is None:
                    await self._be_sent()
                else:
                    await self._read_paced()
            except asyncio.CancelledError:
                self._fold.pending = None
                raise
            except (TransientBusError, TimeoutError, ConnectionError) as err:  # routine
                self._fold.pending = None
                log.warning(
                    "log follower lost its reader at seq %d (%s); resuming",
                    self.seq,
                    err or type(err).__name__,
                )
                await asyncio.sleep(0.5)
            except Exception:  # the reader died otherwise: resume after a pause
                self._fold.pending = None
                log.exception(
                    "log follower lost its reader at seq %d; resuming",
                    self.seq,
                    extra={"seq": self.seq},
                )
                await asyncio.sleep(0.5)

    async def _be_sent(self) -> None:
        """Each message as it is stored, until reads are paced (seen at the next one)."""
        folded = self._fold
        async with contextlib.aclosing(self.log.read(from_seq=self.seq + 1)) as entries:
            async for entry in entries:
                folded.pending = entry.num_pending
                await self._apply(entry.seq, entry.subject, entry.data, entry.headers)
                if folded.interval is not None:
                    return

    async def _read_paced(self) -> None:
        """What was stored, a batch every interval, until each message is to be sent."""
        folded = self._fold
        folded.pending = None  # unknown between reads: `fresh` catches up
        while folded.interval is not None:
            folded.poke.clear()
            batch = await self.log.read_stored(self.seq + 1, PACED_BATCH)
            for entry in batch:
                await self._apply(entry.seq, entry.subject, entry.data, entry.headers)
            if batch and batch[-1].num_pending > 0:
                continue  # more was stored than one read takes
            # Someone waits for a position not read yet: the replica that answered may
            # lag a little behind the one that acked it, so ask again soon.
            short = folded.waiting and folded.wanted > self.seq
            wait = PACED_RETRY_S if short else folded.interval
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await folded.poke.wait()
        folded.pending = None

    async def _apply(
        self, seq: int, subject: str, data: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        folded = self._fold
        if seq <= folded.seq:
            return
        events = admitted(seq, subject, data, self.log.prefix)
        if traces.enabled():
            folded.traces.note_message(data, headers)
        state = folded.state
        for event in events:
            fold(state, event)
        folded.seq = seq
        folded.last_on_subject[subject] = seq
        for listener in list(folded.listeners):
            try:
                result = listener(seq, subject, events)
                if result is not None:
                    await result
            except Exception:
                log.exception("listener failed on seq=%d", seq, extra={"seq": seq})
        async with folded.advanced:
            folded.advanced.notify_all()

    async def wait_for(self, seq: int, timeout: float | None = 10.0) -> None:
        """Return once everything up to `seq` is folded.

        asyncio.timeout, not wait_for: 3.11's wait_for drops a cancellation that comes
        as the fold advances, and the cancelled caller would go on."""
        folded = self._fold
        if folded.seq >= seq:
            return
        if seq > folded.wanted:
            folded.wanted = seq
            folded.poke.set()  # paced: read now, not at the next interval
        folded.waiting += 1
        try:
            async with folded.advanced, asyncio.timeout(timeout):
                await folded.advanced.wait_for(lambda: folded.seq >= seq)
        finally:
            folded.waiting -= 1

    async def catch_up(self, timeout: float | None = 10.0) -> int:
        """Fold everything the stream holds right now; returns that position."""
        target = await self.log.last_seq()
        await self.wait_for(target, timeout)
        return target

    @property
    def pushed_current(self) -> bool:
        """The newest folded message was the last the server had for this reader when it
        sent it: anything newer is on its way and will be folded and heard of. Enough
        for a reader that acts on every change anyway (the scheduler's pass, whose
        appends are fenced), not for read-your-writes (that is `catch_up`)."""
        return self._fold.pending == 0

    async def fresh(self, timeout: float | None = 10.0) -> int:
        """`catch_up`, without the round trip when `pushed_current`; returns `seq`."""
        if not self.pushed_current:
            await self.catch_up(timeout)
        return self.seq
