"""The scheduler: follow the log, lead queues by lease, append fenced decisions.

Per led queue, decisions go to `qm.decisions.<queue>` with the expected last
subject sequence this instance has folded: a deposed leader (one that missed
a newer decision) is fenced off by JetStream and cannot write.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import time

from qm_scheduler.grouping import HOSTS, by_queue
from qm_scheduler.settings import SchedulerSettings
from qm_scheduler.snapshots import SnapshotStore
from quartermaster.bus import BusError, FencedAppendError, JetStreamLog, KvLease
from quartermaster.core import PassPolicy, decide
from quartermaster.core.snapshot import take
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.events import AnyEvent, Event

log = logging.getLogger("qm.scheduler")


class Scheduler:
    def __init__(self, settings: SchedulerSettings, event_log: JetStreamLog) -> None:
        self.settings = settings
        self.log = event_log
        self.policy = PassPolicy(heartbeat_timeout_seconds=settings.heartbeat_timeout_seconds)
        self.follower: LogFollower | None = None
        self.leases: KvLease | None = None
        self.snapshots: SnapshotStore | None = None
        self._dirty = asyncio.Event()
        self._since_snapshot = 0
        self.passes = 0
        self.decisions_appended = 0

    # ---- lifecycle ------------------------------------------------------
    async def start(self) -> None:
        self.snapshots = await SnapshotStore.open(self.log, self.settings.snapshot_bucket)
        snapshot = await self.snapshots.load()
        self.follower = LogFollower(self.log, snapshot)
        if snapshot is not None:
            log.info("restored snapshot at seq=%d", self.follower.seq)
            gc.collect()
            gc.freeze()  # the restored state is long-lived: keep full collections off it
        self.follower.listen(self._on_batch)
        self.leases = await KvLease.open(self.log, self.settings.lease_bucket, max_ttl_s=3600)
        await self.follower.start()

    async def run(self) -> None:
        """Start, then lead and decide until cancelled."""
        await self.start()
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._lease_loop(), name="leases")
                tasks.create_task(self._decide_loop(), name="decide")
        finally:
            await self.stop()

    async def stop(self) -> None:
        if self.leases is not None:
            for key in list(self._led()):
                with contextlib.suppress(BusError):
                    await self.leases.release(key)
        if self.follower is not None:
            await self.follower.stop()

    def _on_batch(self, seq: int, subject: str, events: list[AnyEvent]) -> None:
        self._since_snapshot += 1
        self._dirty.set()

    # ---- leadership -------------------------------------------------------
    def _lease_key(self, queue: str) -> str:
        return f"{self.log.stream}.{subjects.token(queue)}"

    def _led(self) -> list[str]:
        assert self.leases is not None and self.follower is not None
        names = [*self.follower.state.queues, HOSTS]
        return [self._lease_key(q) for q in names if self.leases.held(self._lease_key(q))]

    def led_queues(self) -> frozenset[str]:
        assert self.leases is not None and self.follower is not None
        return frozenset(
            q for q in self.follower.state.queues if self.leases.held(self._lease_key(q))
        )

    def _may_lead(self, queue: str) -> bool:
        return not self.settings.queues or queue in self.settings.queues or queue == HOSTS

    async def _lease_loop(self) -> None:
        assert self.leases is not None and self.follower is not None
        ttl = self.settings.lease_ttl_seconds
        while True:
            for queue in [*sorted(self.follower.state.queues), HOSTS]:
                if not self._may_lead(queue):
                    continue
                key = self._lease_key(queue)
                try:
                    if self.leases.held(key):
                        if not await self.leases.renew(key):
                            log.warning("lost the lease of queue %s", queue)
                    elif await self.leases.acquire(key, self.settings.instance_id, ttl):
                        log.info("leading queue %s", queue)
                        self._dirty.set()
                except BusError:
                    log.exception("lease %s", key)
            await asyncio.sleep(ttl / 3)

    # ---- deciding ---------------------------------------------------------
    async def _decide_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.settle()
                await self._maybe_snapshot()
            except BusError:
                log.exception("pass failed; retrying on the next change")
                await asyncio.sleep(0.2)
                self._dirty.set()

    async def settle(self) -> int:
        """Run passes until one decides nothing for the queues this instance leads."""
        assert self.follower is not None and self.leases is not None
        appended = 0
        for _ in range(64):
            await self.follower.catch_up()
            state = self.follower.state
            queues = self.led_queues()
            hosts = self.leases.held(self._lease_key(HOSTS))
            if not queues and not hosts:
                return appended
            started = time.perf_counter()
            decisions = decide(state, self.policy, queues=queues, hosts=hosts)
            self.passes += 1
            if not decisions:
                return appended
            log.debug(
                "pass: %d decisions in %.2f ms",
                len(decisions),
                (time.perf_counter() - started) * 1e3,
            )
            last = 0
            for queue, group in by_queue(state, decisions).items():
                last = max(last, await self._append(queue, group))
                appended += len(group)
            self.decisions_appended += appended
            await self.follower.wait_for(last)
        return appended

    async def _append(self, queue: str, decisions: list[Event]) -> int:
        assert self.follower is not None
        data = encode_batch(decisions)
        if queue == HOSTS:  # any instance may judge liveness; equal judgements dedupe
            subject = subjects.host_decisions(self.log.prefix)
            msg_id = "hosts:" + hashlib.sha256(data).hexdigest()[:32]
            return await self.log.append(subject, data, msg_id=msg_id)
        subject = subjects.decisions(queue, self.log.prefix)
        expected = self.follower.last_on_subject.get(subject, 0)
        try:
            return await self.log.append(
                subject, data, msg_id=f"{subject}:{expected}", expected_last_subject_seq=expected
            )
        except FencedAppendError:
            log.warning("decisions for %s fenced: another leader wrote; re-reading", queue)
            await self.follower.catch_up()
            return self.follower.seq

    async def _maybe_snapshot(self) -> None:
        assert self.follower is not None and self.snapshots is not None
        if self._since_snapshot < self.settings.snapshot_every:
            return
        self._since_snapshot = 0
        await self.snapshots.save(take(self.follower.state, self.follower.seq))
        log.info("snapshot at seq=%d", self.follower.seq)
