"""Job status changes for `WatchServiceJobs`, cut from the follower's folded batches.

One hub listens to the follower (listeners cannot be removed, so there is one per
process). After each folded envelope it looks at the jobs the envelope touched
and, where a job's (status, status_reason) differs from what the hub saw last,
makes one `JobStateChange` at the envelope's seq. Changes fan out to the
subscriptions whose filter matches, and the last `history` of them are kept so a
client can resume after a sequence it already saw.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable

import msgspec

from qm_admission.errors import Code, RequestRejected
from qm_admission.translate import job_state_change
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.eventlog import LogFollower

log = logging.getLogger(__name__)


class WatchFilter(msgspec.Struct, frozen=True):
    job_queue: str | None = None
    quota_share: str | None = None
    job_ids: frozenset[str] = frozenset()
    # (queue, share) pairs the caller may see; None: all (admins, auditors)
    allowed_shares: frozenset[tuple[str, str]] | None = None
    statuses: frozenset[int] = frozenset()  # pb.JobStatus values; empty: all

    def wants(self, status: int) -> bool:
        """Whether changes to `status` are streamed at all."""
        return not self.statuses or status in self.statuses

    def matches(self, change: pb.JobStateChange) -> bool:
        return (
            self.wants(change.status)
            and (
                self.allowed_shares is None
                or (change.job_queue, change.quota_share_name) in self.allowed_shares
            )
            and (self.job_queue is None or change.job_queue == self.job_queue)
            and (self.quota_share is None or change.quota_share_name == self.quota_share)
            and (not self.job_ids or change.job_id in self.job_ids)
        )


class Subscription:
    """Changes waiting for one stream; closed when it falls `limit` changes behind."""

    def __init__(self, where: WatchFilter, limit: int) -> None:
        self.where = where
        self._limit = limit
        self._pending: deque[pb.JobStateChange] = deque()
        self._ready = asyncio.Event()
        self.overflowed = False
        self.closed = False

    def offer(self, change: pb.JobStateChange) -> None:
        if self.closed:
            return
        if len(self._pending) >= self._limit:
            self.overflowed = True
            self.close()
            return
        self._pending.append(change)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def next(self) -> pb.JobStateChange | None:
        """The next change, or None once the subscription is closed and drained."""
        while not self._pending:
            if self.closed:
                return None
            self._ready.clear()
            await self._ready.wait()
        if self.overflowed:
            return None
        return self._pending.popleft()


class JobWatchHub:
    def __init__(
        self, follower: LogFollower, *, history: int = 10_000, subscriber_limit: int = 10_000
    ) -> None:
        self._follower = follower
        self._subscriber_limit = subscriber_limit
        state = follower.state
        self._seen: dict[str, tuple[str, str]] = {
            job.job_id: (job.status.value, job.status_reason) for job in state.jobs.values()
        }
        self._host_job: dict[str, str] = {
            host.host_id: host.holder for host in state.hosts.values() if host.holder
        }
        self._recent: deque[pb.JobStateChange] = deque(maxlen=history)
        self._horizon = follower.seq  # every change after this seq is in `_recent`
        self._subscriptions: set[Subscription] = set()
        follower.listen(self._on_batch)

    # ---- the follower's side -------------------------------------------------
    def _on_batch(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        touched: dict[str, float] = {}
        for event in events:
            for job_id in self._jobs_touched(event):
                touched[job_id] = event.at
        if not touched:
            return
        jobs = self._follower.state.jobs
        for job_id, at in touched.items():
            job = jobs.get(job_id)
            if job is None:
                continue
            now = (job.status.value, job.status_reason)
            if self._seen.get(job_id) == now:
                continue
            self._seen[job_id] = now
            self._publish(job_state_change(job, seq, at))

    def _jobs_touched(self, event: ev.AnyEvent) -> Iterable[str]:
        if isinstance(event, ev.JobDispatched):
            for host in event.hosts:
                self._host_job[host] = event.job_id
        if isinstance(event, ev.HostLost):
            holder = self._host_job.get(event.host_id)
            return (holder,) if holder else ()
        job_id = getattr(event, "job_id", None)
        return (job_id,) if isinstance(job_id, str) else ()

    def _publish(self, change: pb.JobStateChange) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._horizon = self._recent[0].sequence
        self._recent.append(change)
        for subscription in list(self._subscriptions):
            if subscription.where.matches(change):
                subscription.offer(change)
                if subscription.overflowed:
                    log.warning("watch subscriber fell behind; closing its stream")
                    self._subscriptions.discard(subscription)

    # ---- the stream's side ---------------------------------------------------
    def subscribe(self, where: WatchFilter, after_sequence: int = 0) -> Subscription:
        """A subscription primed with where to start: the current state of the named jobs
        (from now on), or the kept changes after `after_sequence` (resume)."""
        if after_sequence and after_sequence < self._horizon:
            raise RequestRejected(
                Code.OUT_OF_RANGE,
                "after_sequence",
                f"changes before seq {self._horizon} are no longer kept; "
                "describe the jobs and watch from 0",
            )
        subscription = Subscription(where, self._subscriber_limit)
        if after_sequence:
            for change in self._recent:
                if change.sequence > after_sequence and where.matches(change):
                    subscription.offer(change)
        else:
            state = self._follower.state
            for job_id in sorted(where.job_ids):
                job = state.jobs.get(job_id)
                if job is not None:
                    change = job_state_change(job, self._follower.seq, state.now)
                    if where.wants(change.status):
                        subscription.offer(change)
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        subscription.close()
        self._subscriptions.discard(subscription)

    def close(self) -> None:
        """End every stream (on shutdown)."""
        for subscription in list(self._subscriptions):
            self.unsubscribe(subscription)
