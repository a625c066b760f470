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

A view that only frees its host (its job ended there, and nothing else changed) is
held back up to `HOLD_S`: the scheduler's next pass mostly dispatches a waiting job
onto the host at once, and the view of that dispatch then says both, one message
instead of two. The agent has nothing to do on a freed host but forget the ended
attempt's record (it sent the end itself); a host no dispatch comes for gets the held
view once `HOLD_S` has passed.

Each view goes out at once on the host's unstored subject (what the agent acts on), and
is stored on the feed at most once per `STORE_EVERY_S` per host: the newest view then,
the ones between skipped (each view is whole, not a delta, so the newest says all). The
feed is what a restarted or reconnecting agent reads, and what an agent that missed a
view sent at once gets it from, at most `STORE_EVERY_S` later. Under load a host gets
many views a second, and each stored one was a replicated append and a delivery to its
agent; an idle host's views are stored at once, as before. Stores run in a task of their
own, one host's in order, so a view sent at once never waits behind a feed append's
replication. A restarted agent skips a stored view older than the newest it acted on
(`qm_node_agent.viewmark`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable

import msgspec

from quartermaster.bus import BusError
from quartermaster.bus.feed import fast_subject, feed_stream, feed_subject
from quartermaster.bus.inline import write_now
from quartermaster.bus.jetstream import MSG_ID
from quartermaster.bus.translate import NATS_FAILURES, bus_error
from quartermaster.cancelling import cancel_and_wait
from quartermaster.core import Host
from quartermaster.eventlog.follower import LogFollower
from quartermaster.eventlog.host_feed import HostView, encode_view, live_on, touched, view_of
from quartermaster.events import AnyEvent

log = logging.getLogger(__name__)

RESYNC_S = 5.0
HOLD_S = 0.2  # the most a view that only frees its host waits for the next dispatch
STORE_EVERY_S = 0.5  # a host's view is stored on the feed at most this often (the newest)


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
        self._shown: dict[str, Host | None] = {}  # host -> its entry in that view
        self._held: dict[str, float] = {}  # host -> when its held view goes out (monotonic)
        self._stored_at: dict[str, float] = {}  # host -> when its view was last stored
        self._unstored: dict[str, HostView] = {}  # host -> its newest view sent, not stored
        self._dirty: set[str] = set()
        self._publishing: set[str] = set()  # hosts whose view is being published
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._storer: asyncio.Task[None] | None = None
        self._store_wake = asyncio.Event()
        self._storing = False  # a round of stores is under way
        self.published = 0  # views sent (tests, benchmarks)
        self.stored = 0  # views stored on the feed
        follower.listen(self._on_message)

    async def start(self) -> None:
        self._index_all()
        self._task = asyncio.create_task(self._run(), name="host-relay")
        self._storer = asyncio.create_task(self._store_views(), name="host-relay-store")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
        storer, self._storer = self._storer, None
        if storer is not None:
            await cancel_and_wait(storer)

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The task that sends the views (None: not started or stopped): for health
        checks; one whose storer ended counts as ended."""
        storer = self._storer
        if storer is not None and storer.done():
            return storer
        return self._task

    def poke(self) -> None:
        """Look again now whether this instance publishes (its lease may have changed)."""
        self._wake.set()

    async def flush(self, timeout: float = 10.0) -> None:
        """Return once every host marked so far has been published (tests)."""
        async with asyncio.timeout(timeout):
            while (
                self._dirty
                or self._publishing
                or self._held
                or self._unstored
                or self._storing
                or self._wake.is_set()
            ):
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
            resync_at = time.monotonic() + RESYNC_S
            wake_at = min([resync_at, *self._held.values()])
            try:
                async with asyncio.timeout(max(0.0, wake_at - time.monotonic())):
                    await self._wake.wait()
            except TimeoutError:
                if time.monotonic() >= resync_at:
                    self._mark_all()
            now = time.monotonic()
            self._dirty.update(host for host, due in self._held.items() if due <= now)
            self._wake.clear()
            active = self._active()
            if active and not self._was_active:
                self._published.clear()  # another instance may have published meanwhile
                self._shown.clear()
                self._mark_all()
            self._was_active = active
            if not active:
                self._dirty.clear()
                self._held.clear()
                self._unstored.clear()  # the next publisher sends and stores every view
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
            failed = await _each_host(hosts, self._publish, "published")
        finally:
            self._publishing.difference_update(hosts)
        self._dirty.update(failed)  # published again after a pause
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
            self._held.pop(host_id, None)
            return
        if self._holds(view):
            return
        self._held.pop(host_id, None)
        data = encode_view(view)
        try:
            # At once and unstored: the agent need not wait for the feed's replication.
            await follower.log.nc.publish(fast_subject(host_id, self._prefix), data)
            write_now(follower.log.nc)  # now, not at nats-py's flusher's next turn
        except NATS_FAILURES as err:
            raise bus_error(err, f"publish the view of {host_id}") from err
        self._published[host_id] = same
        self._shown[host_id] = view.host
        self.published += 1
        # The storer looks again when a host joins the unstored (its due time may come
        # before the one it waits for) or one is due now; a newer view of a host already
        # waiting replaces it and is due when it was.
        waiting = host_id in self._unstored
        self._unstored[host_id] = view
        if not waiting or self._store_due(host_id) <= time.monotonic():
            self._store_wake.set()

    def _store_due(self, host_id: str) -> float:
        """When the host's newest view may be stored (monotonic)."""
        return self._stored_at.get(host_id, -STORE_EVERY_S) + STORE_EVERY_S

    async def _store_views(self) -> None:
        """Store each host's newest view sent once it is due, until cancelled."""
        while True:
            wake_at = min([math.inf, *map(self._store_due, self._unstored)])
            self._store_wake.clear()
            delay = None if wake_at == math.inf else max(0.0, wake_at - time.monotonic())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._store_wake.wait()
            self._storing = True
            try:
                await self._store_due_views()
            finally:
                self._storing = False

    async def _store_due_views(self) -> None:
        now = time.monotonic()
        # Taken now: each store runs as a task of its own, after `_run` may have emptied
        # `_unstored` (this instance no longer publishes).
        due = {host: view for host, view in self._unstored.items() if self._store_due(host) <= now}
        if not due:
            return
        failed = await _each_host(list(due), lambda host: self._store(host, due[host]), "stored")
        if failed:  # still unstored: stored again after a pause
            await asyncio.sleep(0.5)

    async def _store(self, host_id: str, view: HostView) -> None:
        """Store `view`, the host's newest sent, on the feed (msg id `<host>:<seq>`: a
        retry stores it once). Only the storer task stores, a host's views one at a time:
        an older view stored after a newer one would replace it on the feed."""
        try:
            await self._follower.log.js.publish(
                feed_subject(host_id, self._prefix),
                encode_view(view),
                stream=self._stream,
                headers={MSG_ID: f"{host_id}:{view.seq}"},
            )
        except NATS_FAILURES as err:
            raise bus_error(err, f"store the view of {host_id}") from err
        self._stored_at[host_id] = time.monotonic()
        if self._unstored.get(host_id) is view:  # not replaced by a newer one meanwhile
            del self._unstored[host_id]
        self.stored += 1

    def _holds(self, view: HostView) -> bool:
        """Whether to hold the view back: it frees its host and changes nothing else in
        what was last sent for it, and has waited less than `HOLD_S`."""
        host = view.host
        if view.jobs or view.pools or host is None or host.holder is not None:
            return False
        shown = self._shown.get(view.host_id)
        if shown is None or shown.holder is None:
            return False
        if msgspec.structs.replace(shown, holder=None, holder_env=None) != host:
            return False
        now = time.monotonic()
        return now < self._held.setdefault(view.host_id, now + HOLD_S)


async def _each_host(
    hosts: list[str], step: Callable[[str], Awaitable[None]], done: str
) -> list[str]:
    """Run `step` for every host at once (the last host waits for no other's round trip);
    returns those whose step failed on the bus (a NATS leader change, mostly), logged.
    Any other error is raised.

    One host's step runs in the caller's task: a task of its own would begin only at the
    loop's next turn, after what else is ready (on the leading scheduler, the pass that
    follows its own decision: 0.35 ms p50 before an idle job's view went out)."""
    results: list[BaseException | None]
    if len(hosts) == 1:
        results = [None]
        try:
            await step(hosts[0])
        except Exception as err:  # as gather's return_exceptions (a cancel is raised)
            results = [err]
    else:
        results = await asyncio.gather(*(step(host) for host in hosts), return_exceptions=True)
    failed = []
    for host, result in zip(hosts, results, strict=True):
        if isinstance(result, BusError):
            log.warning("host=%s view not %s (%s); retrying", host, done, result)
            failed.append(host)
        elif isinstance(result, BaseException):
            raise result
    return failed
