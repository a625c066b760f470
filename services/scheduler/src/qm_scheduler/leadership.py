"""Queue leases kept on a thread of their own, over a NATS connection of their own.

Why apart from the pass: a renewal that shares the event loop waits behind every
fold and pass, and one that shares the follower's connection waits behind a
catch-up read; under load both made renewals time out and leadership move with
no fault at all. Here renewals run every `lease_renew_seconds` whatever the rest
of the process does, with an ack timeout shorter than the TTL, so a slow write
is retried before the lease lapses. The main loop only reads `led(key)` and is
woken through `on_change` when this instance gains or loses a lease.

One key may be the `anchor` (the host-liveness lease, whose holder relays the hosts'
views): a free key goes first to the anchor's holder. Another instance lets it be for one
lease TTL before taking it, so the queues' decisions and the views they cause are made
in one process, not handed from one scheduler to the other through a delivery of the log
(which lengthened every dispatch where two schedulers had split the leases at start). The
anchor is renewed or taken first in each round, so a standby that takes over takes the
anchor and then, in the same round, the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from qm_scheduler.settings import SchedulerSettings
from quartermaster.bus import BusError, JetStreamLog, KvLease, TransientBusError
from quartermaster.cancelling import cancel_and_wait

log = logging.getLogger("qm.scheduler.leadership")

_MAX_LEASE_TTL_S = 3600.0
# Stopping: releasing the held leases lets a standby take over at once, but a bus that is
# gone must not hold the stop up (the TTL hands them over anyway).
_RELEASE_BUDGET_S = 1.0


class LeadershipError(RuntimeError):
    """The lease thread could not connect or open the lease bucket."""


class Leadership:
    """Acquires and renews the leases of the keys `want`ed; `led(key)` says which it holds."""

    def __init__(
        self,
        settings: SchedulerSettings,
        servers: Sequence[str],
        stream: str,
        on_change: Callable[[], None],
        anchor: str | None = None,
    ) -> None:
        self._settings = settings
        self._anchor = anchor
        self._deferred: dict[str, float] = {}  # free key -> when this instance first let it be
        self._servers = ",".join(servers)
        self._stream = stream
        self._on_change = on_change
        self._wanted: tuple[str, ...] = ()
        self._led: dict[str, float] = {}  # key -> valid until (monotonic); replaced whole
        self._ready = threading.Event()
        self._abandoned = threading.Event()  # stopped before it connected
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self.gained = 0  # leases this instance took (a measure of leadership moves)
        self.lost = 0  # leases it held and then found taken or lapsed

    # ---- read and steer from the main thread -----------------------------
    def want(self, keys: Iterable[str]) -> None:
        """Lead these keys from now on (the set replaces the previous one)."""
        self._wanted = tuple(keys)

    def led(self, key: str) -> bool:
        until = self._led.get(key)
        return until is not None and time.monotonic() < until

    def leading(self) -> list[str]:
        """The keys this instance leads now, sorted."""
        now = time.monotonic()
        return sorted(key for key, until in self._led.items() if now < until)

    @property
    def running(self) -> bool:
        """The lease thread is alive (renewing, or retrying its connection)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, timeout_s: float = 30.0) -> None:
        """Start the thread; return once its connection and bucket are open."""
        self._thread = threading.Thread(target=self._main, name="qm-leases", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise LeadershipError(f"lease thread not ready within {timeout_s}s")
        if self._abandoned.is_set():
            raise LeadershipError("stopped while the lease thread connected")
        if self._error is not None:
            raise LeadershipError(f"lease thread failed: {self._error}") from self._error

    def stop(self, timeout_s: float = 3.0) -> None:
        """Release every held lease (standbys take over at once) and end the thread."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._abandoned.set()  # a thread still connecting gives up (and start() returns)
        self._ready.set()
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # its loop already ended
                loop.call_soon_threadsafe(stopping.set)
        thread.join(timeout_s)

    # ---- the thread --------------------------------------------------------
    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as err:  # reported through start() or the log
            self._error = err
            self._ready.set()
            log.exception("lease thread ended")

    async def _run(self) -> None:
        s = self._settings
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        opened = await self._open()
        if opened is None:
            return
        bus, leases = opened
        try:
            self._ready.set()
            stopping = asyncio.create_task(self._stopping.wait())
            try:
                while not self._stopping.is_set():
                    # A stop does not wait for a round of renewals (one ack timeout per
                    # key while the bus is gone): the round is cut short.
                    ticking = asyncio.create_task(self._tick(leases))
                    await asyncio.wait({ticking, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    if not ticking.done():
                        await cancel_and_wait(ticking)
                        break
                    ticking.result()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(s.lease_renew_seconds):
                            await self._stopping.wait()
            finally:
                stopping.cancel()
            await self._release_all(leases, bus)
        finally:
            await bus.close()

    async def _open(self) -> tuple[JetStreamLog, KvLease] | None:
        """Connect and open the bucket, retrying transient failures (a NATS leader
        election while this replica starts must not stop it); None: stopped meanwhile."""
        s = self._settings
        while not self._abandoned.is_set():
            try:
                bus = await JetStreamLog.connect(
                    self._servers,
                    self._stream,
                    s.subject_prefix,
                    connection_name=f"qm-scheduler-leases-{s.holder_name}",
                    credentials=s.nats_credentials(),
                    timeout_s=max(0.2, s.lease_ttl_seconds / 3),
                    create_stream=False,
                )
            except TransientBusError as err:
                log.warning("lease connection: %s (retrying)", err)
                await asyncio.sleep(0.5)
                continue
            try:
                leases = await KvLease.open(
                    bus, s.lease_bucket, max_ttl_s=_MAX_LEASE_TTL_S, replicas=s.stream_replicas
                )
            except TransientBusError as err:
                await bus.close()
                log.warning("lease bucket %s: %s (retrying)", s.lease_bucket, err)
                await asyncio.sleep(0.5)
                continue
            except BaseException:
                await bus.close()
                raise
            if self._abandoned.is_set():
                await bus.close()
                return None
            return bus, leases
        return None

    async def _tick(self, leases: KvLease) -> None:
        s = self._settings
        before = set(self._led)
        anchor = self._anchor if self._anchor in self._wanted else None
        self._deferred = {k: t for k, t in self._deferred.items() if k in self._wanted}
        keys = sorted(self._wanted, key=lambda key: key != anchor)  # the anchor first
        for key in keys:
            try:
                if await leases.renew(key) or self._defer(key, anchor, leases):
                    continue
                if await leases.acquire(key, s.holder_name, s.lease_ttl_seconds):
                    self._deferred.pop(key, None)
            except BusError as err:
                log.warning("lease %s: %s (retrying in %.2fs)", key, err, s.lease_renew_seconds)
        led = {key: until for key in self._wanted if (until := leases.valid_until(key))}
        self._led = led
        gained, lost = set(led) - before, before - set(led)
        for key in sorted(gained):
            log.info("leading %s as %s", key, s.holder_name)
        for key in sorted(lost):
            log.warning("no longer leading %s", key)
        self.gained += len(gained)
        self.lost += len(lost)
        if gained or lost:
            try:
                self._on_change()
            except RuntimeError:  # the main loop is closing: nobody to wake
                log.debug("leadership changed while the scheduler stops")

    def _defer(self, key: str, anchor: str | None, leases: KvLease) -> bool:
        """Whether to let `key` be this round: this instance does not hold the anchor (so
        its holder may take the key first), and has let the key be for less than a lease
        TTL since it first wanted it (after that it tries every round, as before)."""
        if anchor is None or key == anchor or leases.held(anchor):
            self._deferred.pop(key, None)
            return False
        now = time.monotonic()
        since = self._deferred.setdefault(key, now)
        return now - since < self._settings.lease_ttl_seconds

    async def _release_all(self, leases: KvLease, bus: JetStreamLog) -> None:
        self._led = {}
        if not bus.nc.is_connected:
            return  # nothing to release to: the leases lapse after their TTL
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_RELEASE_BUDGET_S):
                for key in self._wanted:
                    with contextlib.suppress(BusError):
                        await leases.release(key)
