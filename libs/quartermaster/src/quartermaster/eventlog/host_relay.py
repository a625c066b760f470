"""Publishes each host's view (`host_feed.HostView`) whenever a folded batch may change it.

Runs beside a `LogFollower` (the scheduler's): after every folded message it marks
the hosts the message names, or whose jobs or pools it names (progress reports,
JobStarting and JobRunning, change nothing an agent acts on and mark none:
`host_feed.touched`), and one task then
publishes each marked host's view on the feed stream, in order, with the msg id
`<host>:<seq>` (a retry stores it once). A view equal to the last one published
for that host is not sent again. `active()` says whether this instance publishes
(the scheduler holding the host-liveness lease): when it turns true, and every
`RESYNC_S` seconds, every known host is compared again, so a gap left by a
previous publisher, or a change no message named, is closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import msgspec

from quartermaster.bus import BusError
from quartermaster.bus.feed import feed_stream, feed_subject
from quartermaster.bus.jetstream import MSG_ID
from quartermaster.bus.translate import NATS_FAILURES, bus_error
from quartermaster.cancelling import cancel_and_wait
from quartermaster.eventlog.follower import LogFollower
from quartermaster.eventlog.host_feed import encode_view, live_on, touched, view_of
from quartermaster.events import AnyEvent

log = logging.getLogger(__name__)

RESYNC_S = 5.0


class HostRelay:
    def __init__(self, follower: LogFollower, active: Callable[[], bool] = lambda: True) -> None:
        self._follower = follower
        self._active = active
        self._was_active = False
        self._stream = feed_stream(follower.log.stream)
        self._prefix = follower.log.prefix
        self._candidates: dict[str, set[str]] = {}  # host -> jobs that may be live there
        self._hosts_of: dict[str, set[str]] = {}  # job -> hosts it is a candidate on
        self._published: dict[str, bytes] = {}  # host -> its last view sent (seq 0)
        self._dirty: set[str] = set()
        self._publishing: set[str] = set()  # hosts whose view is being published
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.published = 0  # views sent (tests, benchmarks)
        follower.listen(self._on_message)

    async def start(self) -> None:
        self._index_all()
        self._task = asyncio.create_task(self._run(), name="host-relay")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)

    def poke(self) -> None:
        """Look again now whether this instance publishes (its lease may have changed)."""
        self._wake.set()

    async def flush(self, timeout: float = 10.0) -> None:
        """Return once every host marked so far has been published (tests)."""
        async with asyncio.timeout(timeout):
            while self._dirty or self._publishing or self._wake.is_set():
                await asyncio.sleep(0.01)

    def _on_message(self, seq: int, subject: str, events: list[AnyEvent]) -> None:
        if not events:
            return
        state = self._follower.state
        hosts, jobs = touched(state, events)
        for job_id in jobs:
            hosts |= self._hosts_of.get(job_id, set())  # its new attempt may have left them
            job = state.jobs.get(job_id)
            for host in job.hosts if job is not None else ():
                self._add(host, job_id)
        if hosts:
            self._dirty |= hosts
            self._wake.set()

    def _add(self, host_id: str, job_id: str) -> None:
        self._candidates.setdefault(host_id, set()).add(job_id)
        self._hosts_of.setdefault(job_id, set()).add(host_id)

    def _index_all(self) -> None:
        """Candidates from the whole state (once, at start: a restored snapshot)."""
        state = self._follower.state
        for job in state.jobs.values():
            for host in job.hosts:
                if live_on(job, host):
                    self._add(host, job.job_id)
        self._mark_all()

    def _mark_all(self) -> None:
        self._dirty |= set(self._follower.state.hosts) | set(self._published)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(RESYNC_S):
                    await self._wake.wait()
            except TimeoutError:
                self._mark_all()
            self._wake.clear()
            active = self._active()
            if active and not self._was_active:
                self._published.clear()  # another instance may have published meanwhile
                self._mark_all()
            self._was_active = active
            if not active:
                self._dirty.clear()
                continue
            while self._dirty:
                await self._publish_marked()

    async def _publish_marked(self) -> None:
        """Publish every marked host's view at once (acks awaited together, so the last
        host of a job over many hosts waits for no other host's round trip)."""
        hosts = sorted(self._dirty)
        self._dirty.difference_update(hosts)  # marked again meanwhile: published again
        self._publishing.update(hosts)
        try:
            results = await asyncio.gather(
                *(self._publish(host) for host in hosts), return_exceptions=True
            )
        finally:
            self._publishing.difference_update(hosts)
        failed = False
        for host, result in zip(hosts, results, strict=True):
            if isinstance(result, BusError):  # a NATS leader change, mostly: try again
                log.warning("host=%s view not published (%s); retrying", host, result)
                self._dirty.add(host)
                failed = True
            elif isinstance(result, BaseException):
                raise result
        if failed:
            await asyncio.sleep(0.5)

    async def _publish(self, host_id: str) -> None:
        follower = self._follower
        candidates = self._candidates.get(host_id, set())
        view = view_of(follower.state, host_id, follower.seq, candidates, follower.traces.get)
        live = {job.job_id for job in view.jobs}
        for job_id in candidates - live:  # over on this host: no longer a candidate
            hosts = self._hosts_of.get(job_id)
            if hosts is not None:
                hosts.discard(host_id)
                if not hosts:
                    del self._hosts_of[job_id]
        for job_id in live - candidates:  # the holder, named by no message of its own
            self._hosts_of.setdefault(job_id, set()).add(host_id)
        if live:
            self._candidates[host_id] = live
        else:
            self._candidates.pop(host_id, None)
        same = encode_view(msgspec.structs.replace(view, seq=0))
        if self._published.get(host_id) == same:
            return
        data = encode_view(view)
        subject = feed_subject(host_id, self._prefix)
        try:
            await follower.log.js.publish(
                subject, data, stream=self._stream, headers={MSG_ID: f"{host_id}:{view.seq}"}
            )
        except NATS_FAILURES as err:
            raise bus_error(err, f"publish the view of {host_id}") from err
        self._published[host_id] = same
        self.published += 1
