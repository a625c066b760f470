"""The scheduler: follow the log, lead queues by lease, append fenced decisions.

Leases are kept by `Leadership` on a thread and connection of their own; the pass
only asks which queues it leads. Per led queue, decisions go to
`qm.decisions.<queue>` with the expected last subject sequence this instance has
folded: a deposed leader (one that missed a newer decision) is fenced off by
JetStream and cannot write.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time

from qm_scheduler.grouping import HOSTS, by_queue
from qm_scheduler.leadership import Leadership
from qm_scheduler.settings import SchedulerSettings
from qm_scheduler.snapshots import SnapshotStore
from qm_scheduler.tracing import PassSpans
from quartermaster.bus import BusError, FencedAppendError, JetStreamLog, TransientBusError
from quartermaster.bus.liveness import LivenessWatch
from quartermaster.core import PassPolicy, decide
from quartermaster.core.incremental import PassMemo
from quartermaster.core.snapshot import take
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.eventlog.host_relay import HostRelay
from quartermaster.eventlog.long_lived import Refreezer, freeze_long_lived
from quartermaster.events import AnyEvent, Event
from quartermaster.metrics import SchedulerMetrics

log = logging.getLogger("qm.scheduler")


class Scheduler:
    def __init__(
        self,
        settings: SchedulerSettings,
        event_log: JetStreamLog,
        metrics: SchedulerMetrics | None = None,
        shared: LogFollower | None = None,
    ) -> None:
        """`shared`: a share of the fold of its process (`qm up`), which its owner runs
        (no snapshot is restored into it, and it keeps every job: no retention)."""
        self.settings = settings
        self._shared = shared
        self.metrics = SchedulerMetrics() if metrics is None else metrics
        self.log = event_log
        self.policy = PassPolicy(heartbeat_timeout_seconds=settings.heartbeat_timeout_seconds)
        self.follower: LogFollower | None = None
        self.relay: HostRelay | None = None  # each host's view, for its node agent
        self.liveness: LivenessWatch | None = None  # hosts' heartbeats (not in the log)
        self._watching_since: float | None = None  # monotonic: the bucket read at start
        self.leadership: Leadership | None = None
        self.snapshots: SnapshotStore | None = None
        self._dirty = asyncio.Event()
        self._since_snapshot = 0
        self.memo = PassMemo()  # what each unit pass last decided nothing with
        self.refreezer = Refreezer()  # the folded state out of full GC walks, between passes
        self._known_queues = -1
        self.passes = 0
        self.decisions_appended = 0
        self._own: set[int] = set()  # seqs of this settle's appends (no new pass for them)

    # ---- lifecycle ------------------------------------------------------
    async def start(self) -> None:
        self.snapshots = await SnapshotStore.open(
            self.log, self.settings.snapshot_bucket, replicas=self.settings.stream_replicas
        )
        self.follower = self._shared or await self._own_follower()
        self.follower.listen(self._on_batch)
        if self.settings.relay_host_feeds:
            self.relay = HostRelay(self.follower, active=self._leads_hosts)
        relay = self.relay
        self.liveness = LivenessWatch(self.log.nc, self.log.js, self.log.stream)
        self.liveness.on_ready(self._watching)
        loop = asyncio.get_running_loop()

        def wake() -> None:  # called from the lease thread
            loop.call_soon_threadsafe(self._pace_reads)
            loop.call_soon_threadsafe(self._dirty.set)
            if relay is not None:  # a gained _hosts lease: publish at once
                loop.call_soon_threadsafe(relay.poke)

        self.leadership = Leadership(
            self.settings,
            [server.geturl() for server in self.log.nc.servers],  # the same cluster
            self.log.stream,
            on_change=wake,
            anchor=self._lease_key(HOSTS),
        )
        self._want_leases()
        await asyncio.to_thread(self.leadership.start)
        self._pace_reads()
        await self.follower.start()
        if self.relay is not None:
            await self.relay.start()
        await self.liveness.start()

    async def _own_follower(self) -> LogFollower:
        """A follower of its own, from the newest snapshot, forgetting ended jobs."""
        assert self.snapshots is not None
        restored = await self.snapshots.load_state()
        follower = LogFollower(self.log)
        if restored is not None:
            follower.state, follower.seq = restored
            log.info("restored snapshot at seq=%d", follower.seq, extra={"seq": follower.seq})
            freeze_long_lived()  # the restored state is long-lived: keep full collections off it
        retention = self.settings.terminal_retention_seconds
        follower.state.retention_seconds = retention if retention > 0 else None
        return follower

    async def run(self) -> None:
        """Start, then decide for the queues it leads until cancelled (a cancel while it
        starts stops what was started, the lease thread included)."""
        try:
            await self.start()
            await self._decide_loop()
        finally:
            await self.stop()

    async def stop(self) -> None:
        if self.leadership is not None:
            await asyncio.to_thread(self.leadership.stop)  # releases: standbys take over
        if self.relay is not None:
            await self.relay.stop()
        if self.liveness is not None:
            await self.liveness.stop()
        if self.follower is not None:
            await self.follower.stop()

    def _watching(self) -> None:
        """The bucket's content at start is read: losses may be judged once it has been
        watched for the grace (a pass is woken then)."""
        self._watching_since = time.monotonic()
        asyncio.get_running_loop().call_later(self.settings.liveness_grace, self._dirty.set)

    def judges_liveness(self) -> bool:
        """Whether this replica may judge hosts lost: it read the liveness bucket at start
        (before, a silent host cannot be told from one whose beat has not arrived) and has
        watched it for `liveness_grace` since (a host whose agent restarts with the stack
        beats again within a timeout; its beat from before the stop is older)."""
        since = self._watching_since
        return since is not None and time.monotonic() - since >= self.settings.liveness_grace

    def _on_batch(self, seq: int, subject: str, events: list[AnyEvent]) -> None:
        self._since_snapshot += 1
        if seq not in self._own:  # its own decisions: settle passes again after them
            self._dirty.set()
        if self.follower is not None and len(self.follower.state.queues) != self._known_queues:
            self._want_leases()

    # ---- leadership -------------------------------------------------------
    def _lease_key(self, queue: str) -> str:
        return f"{self.log.stream}.{subjects.token(queue)}"

    def _may_lead(self, queue: str) -> bool:
        return not self.settings.queues or queue in self.settings.queues or queue == HOSTS

    def _want_leases(self) -> None:
        assert self.leadership is not None and self.follower is not None
        queues = self.follower.state.queues
        self._known_queues = len(queues)
        wanted = [q for q in [*sorted(queues), HOSTS] if self._may_lead(q)]
        self.leadership.want(self._lease_key(q) for q in wanted)

    def _pace_reads(self) -> None:
        """Its own fold is sent each message while it leads anything, and reads in batches
        while it stands by (`standby_read_interval_seconds`); a shared fold is its owner's."""
        follower, leadership = self.follower, self.leadership
        if follower is None or follower.shared or leadership is None:
            return
        standby = self.settings.standby_read_interval_seconds or None
        interval = None if leadership.leading() else standby
        if (interval is not None) != follower.paced:
            follower.pace(interval)

    def _leads_hosts(self) -> bool:
        """The host-liveness lease holder also relays the hosts' views (one publisher)."""
        return self.leadership is not None and self.leadership.led(self._lease_key(HOSTS))

    def role(self) -> str:
        """ "leading" and what, or "standing by": for health reports and operators."""
        if self.leadership is None:
            return "not started"
        stream = f"{self.log.stream}."
        keys = [key.removeprefix(stream) for key in self.leadership.leading()]
        return f"leading {', '.join(keys)}" if keys else "standing by"

    def led_queues(self) -> frozenset[str]:
        assert self.leadership is not None and self.follower is not None
        return frozenset(
            q for q in self.follower.state.queues if self.leadership.led(self._lease_key(q))
        )

    # ---- deciding ---------------------------------------------------------
    async def _decide_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.settle()
                await self._maybe_snapshot()
                if self.follower is not None:  # caught up, then every REFREEZE_EVENTS
                    self.refreezer.tend(self.follower.seq)
            except TransientBusError as err:  # routine (a NATS leader change): one line
                log.warning("pass failed (%s); retrying on the next change", err)
                await asyncio.sleep(0.2)
                self._dirty.set()
            except BusError:
                log.exception("pass failed; retrying on the next change")
                await asyncio.sleep(0.2)
                self._dirty.set()

    async def settle(self) -> int:
        """Run passes until one decides nothing for the queues this instance leads."""
        try:
            return await self._settle()
        finally:
            self._own.clear()  # all folded (or given up on): a later batch is news

    async def _settle(self) -> int:
        assert self.follower is not None and self.leadership is not None
        assert self.liveness is not None
        appended = 0
        for _ in range(64):
            if not self.leadership.leading():
                return appended  # standing by: no pass, and no read to the head for one
            await self.follower.fresh()  # no round trip when pushed up to the newest
            state = self.follower.state
            queues = self.led_queues()
            # No loss is judged before the heartbeats were watched for the grace.
            hosts = self.leadership.led(self._lease_key(HOSTS)) and self.judges_liveness()
            if not queues and not hosts:
                return appended
            started = time.perf_counter()
            started_ns = time.time_ns()
            decisions = decide(
                state,
                self.policy,
                queues=queues,
                hosts=hosts,
                memo=self.memo,
                liveness=self.liveness.signs,
            )
            self.passes += 1
            self.metrics.observe_pass(time.perf_counter() - started, len(decisions))
            if not decisions:
                return appended
            log.debug(
                "pass: %d decisions in %.2f ms",
                len(decisions),
                (time.perf_counter() - started) * 1e3,
            )
            last = 0
            spans = PassSpans(self.follower.traces, decisions, started_ns, self.passes)
            try:
                for queue, group in by_queue(state, decisions).items():
                    seq = await self._append(queue, group, spans.header(group))
                    self._own.add(seq)
                    last = max(last, seq)
                    appended += len(group)
            finally:
                spans.end()
            await self.follower.wait_for(last)
        self._dirty.set()  # still deciding after 64 passes: go on after a turn of the loop
        return appended

    async def _append(
        self, queue: str, decisions: list[Event], headers: dict[str, str] | None = None
    ) -> int:
        """Append fenced; `headers` carry trace contexts only, never what the batch says."""
        assert self.follower is not None
        data = encode_batch(decisions)
        if queue == HOSTS:  # any instance may judge liveness; equal judgements dedupe
            subject = subjects.host_decisions(self.log.prefix)
            msg_id = "hosts:" + hashlib.sha256(data).hexdigest()[:32]
            seq = await self.log.append(subject, data, msg_id=msg_id, headers=headers)
            self._appended(decisions)
            return seq
        subject = subjects.decisions(queue, self.log.prefix)
        expected = self.follower.last_on_subject.get(subject, 0)
        try:
            seq = await self.log.append(
                subject,
                data,
                msg_id=f"{subject}:{expected}",
                expected_last_subject_seq=expected,
                headers=headers,
            )
        except FencedAppendError:
            log.warning("decisions for %s fenced: another leader wrote; re-reading", queue)
            await self.follower.catch_up()
            return self.follower.seq
        self._appended(decisions)
        return seq

    def _appended(self, decisions: list[Event]) -> None:
        """Count decisions once they are on the log (a fenced append counts nothing)."""
        assert self.follower is not None
        self.decisions_appended += len(decisions)
        self.metrics.appended_decisions(self.follower.state, decisions)

    async def _maybe_snapshot(self) -> None:
        assert self.follower is not None and self.snapshots is not None
        if self._since_snapshot < self.settings.snapshot_every:
            return
        self._since_snapshot = 0
        await self.snapshots.save(take(self.follower.state, self.follower.seq, lean=True))
        log.info("snapshot at seq=%d", self.follower.seq, extra={"seq": self.follower.seq})
