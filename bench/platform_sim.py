"""A simulated large platform driving the real scheduler service through a simulated day.

    python bench/platform_sim.py [--hosts 1000] [--queues 100] [--jobs 20000] [--seed 1]

A real nats-server and the real `Scheduler` (leases, fenced appends, snapshots);
the hosts are simulated: this script appends what node agents would report
(RUNNING at dispatch, success after the job's simulated duration, stop confirmations
for preemptions) and, every simulated hour, one host lost and one back. Submits follow
a daily curve (busier in the day) over 100 queues of 4 shares. Event times are the
simulated clock, so the day takes what the machine needs, not 24 hours. Prints
decisions/s, pass p50/p99, resident memory, log bytes per job and a restart's time;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import math
import os
import random
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import qm_scheduler.service as scheduler_service
from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.core import decide
from quartermaster.embedded import EmbeddedNats
from quartermaster.eventlog import LogFollower, encode_batch, subjects

UNIT = "ml.g5.xlarge"
STEP = 60.0  # simulated seconds per step
DAY = 24 * 3600.0
STRATEGIES = [
    ev.SharingStrategy.LEND_AND_BORROW,
    ev.SharingStrategy.LEND,
    ev.SharingStrategy.RESERVE,
]
PASSES: list[float] = []


def timed_decide(*args: Any, **kwargs: Any) -> list[ev.Event]:
    started = time.perf_counter()
    try:
        return decide(*args, **kwargs)
    finally:
        PASSES.append(time.perf_counter() - started)


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Platform:
    def __init__(self, log: JetStreamLog, hosts: int, queues: int, jobs: int, seed: int) -> None:
        self.log = log
        self.hosts = [f"h{i:04d}" for i in range(hosts)]
        self.queues = [f"q{i:03d}" for i in range(queues)]
        self.jobs = jobs
        self.rng = random.Random(seed)
        self.clock = 0.0
        self.submitted = 0
        self.finished = 0
        self.ends: list[tuple[float, str, int, tuple[str, ...]]] = []  # heap
        self.stopping: list[tuple[str, int, tuple[str, ...]]] = []
        self.lost: list[str] = []
        self.follower = LogFollower(log)
        self.follower.listen(self._seen)

    def _seen(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        for e in events:
            if isinstance(e, ev.JobDispatched):
                duration = self.rng.expovariate(1 / 1800.0) + 60.0
                heapq.heappush(self.ends, (e.at + duration, e.job_id, e.attempt, e.hosts))
            elif isinstance(e, ev.JobPreemptionRequested):
                job = self.follower.state.jobs.get(e.job_id)
                if job is not None:
                    self.stopping.append((e.job_id, e.attempt, job.hosts))

    async def append(self, subject: str, events: list[ev.Event]) -> int:
        seq = 0
        for i in range(0, len(events), 500):  # within the message size limit
            seq = await self.log.append(subject, encode_batch(events[i : i + 500]))
        return seq

    async def seed(self) -> None:
        config: list[ev.Event] = [
            ev.ServiceEnvironmentCreated(
                at=0.0, name="env", capacity_limits=(ev.CapacityLimit(UNIT, len(self.hosts)),)
            ),
            ev.SchedulingPolicyCreated(at=0.0, name="fifo"),
        ]
        own = max(1, len(self.hosts) // (len(self.queues) * 4))
        for queue in self.queues:
            config.append(
                ev.JobQueueCreated(
                    at=0.0, name=queue, service_environment="env", scheduling_policy="fifo"
                )
            )
            for s in range(4):
                config.append(
                    ev.QuotaShareCreated(
                        at=0.0,
                        job_queue=queue,
                        name=f"s{s}",
                        capacity_limits=(ev.CapacityLimit(UNIT, own),),
                        strategy=STRATEGIES[s % 3],
                        in_share_preemption=ev.State.ENABLED,
                    )
                )
        await self.append(subjects.requests(self.log.prefix), config)
        for host in self.hosts:
            registered = ev.HostRegistered(at=0.0, host_id=host, instance_type=UNIT)
            await self.log.append(
                subjects.reports(host, self.log.prefix), encode_batch([registered])
            )

    def _submits(self) -> list[ev.Event]:
        """This step's submissions: a daily curve around the mean rate."""
        mean = self.jobs / (DAY / STEP)
        rate = mean * (1 + 0.8 * math.sin(2 * math.pi * self.clock / DAY - math.pi / 2))
        count = min(self.jobs - self.submitted, max(0, round(self.rng.gauss(rate, rate**0.5))))
        out: list[ev.Event] = []
        for _ in range(count):
            n = self.submitted
            self.submitted += 1
            out.append(
                ev.JobSubmitted(
                    at=self.clock,
                    job_id=f"j{n:07d}",
                    job_name=f"sim-{n}",
                    job_queue=self.rng.choice(self.queues),
                    quota_share=f"s{self.rng.randrange(4)}",
                    instance_type=UNIT,
                    scheduling_priority=self.rng.randrange(5),
                )
            )
        return out

    def _reports(self) -> dict[str, list[ev.Event]]:
        """What the hosts report by now: ends, stop confirmations."""
        by_host: dict[str, list[ev.Event]] = defaultdict(list)
        for job_id, attempt, hosts in self.stopping:
            for host in hosts:
                by_host[host].append(
                    ev.JobStopConfirmed(at=self.clock, job_id=job_id, attempt=attempt, host=host)
                )
        self.stopping.clear()
        while self.ends and self.ends[0][0] <= self.clock:
            _, job_id, attempt, hosts = heapq.heappop(self.ends)
            job = self.follower.state.jobs.get(job_id)
            if (
                job is None
                or job.attempt_no != attempt
                or job.hosts != hosts
                or job.stop_cause is not None
            ):
                continue  # not placed after all (a race), or preempted or lost meanwhile
            self.finished += 1
            for host in hosts:
                by_host[host].append(
                    ev.JobRunning(at=self.clock, job_id=job_id, attempt=attempt, host=host)
                )
                by_host[host].append(
                    ev.JobSucceeded(at=self.clock, job_id=job_id, attempt=attempt, host=host)
                )
        return by_host

    async def step(self) -> int:
        self.clock += STEP
        last = await self.append(subjects.requests(self.log.prefix), self._submits())
        for host, events in self._reports().items():
            last = await self.append(subjects.reports(host, self.log.prefix), events)
        if int(self.clock) % 3600 == 0:  # one host lost, the previous one back
            if self.lost:
                back = self.lost.pop()
                registered = ev.HostRegistered(at=self.clock, host_id=back, instance_type=UNIT)
                last = await self.append(subjects.reports(back, self.log.prefix), [registered])
            host = self.rng.choice(self.hosts)
            self.lost.append(host)
            lost = ev.HostLost(at=self.clock, host_id=host, reason="simulated loss")
            last = await self.append(subjects.host_decisions(self.log.prefix), [lost])
        return last


async def settled(scheduler: Scheduler, seq: int) -> None:
    """The scheduler folded `seq` and appended nothing since: the step is decided."""
    assert scheduler.follower is not None
    await scheduler.follower.wait_for(seq, timeout=60.0)
    while True:
        before = scheduler.follower.seq
        await asyncio.sleep(0.02)
        if scheduler.follower.seq == before and not scheduler._dirty.is_set():
            return


async def simulate(args: argparse.Namespace, root: Path) -> None:
    scheduler_service.decide = timed_decide  # type: ignore[attr-defined]
    with EmbeddedNats(root / "nats") as nats:
        log = await JetStreamLog.connect(nats.url, stream="SIM", subjects_prefix="sim")
        settings = SchedulerSettings(
            instance_id="sim", heartbeat_timeout_seconds=10 * DAY, snapshot_every=2000
        )
        platform = Platform(log, args.hosts, len(range(args.queues)), args.jobs, args.seed)
        await platform.seed()
        scheduler = Scheduler(settings, log)
        task = asyncio.create_task(scheduler.run())
        while scheduler.follower is None or scheduler.leadership is None:
            await asyncio.sleep(0.05)
        await scheduler.follower.catch_up()
        while len(scheduler.led_queues()) < len(platform.queues):  # it leads every queue
            await asyncio.sleep(0.05)
        await platform.follower.start()
        started = time.perf_counter()
        try:
            while platform.clock < DAY:
                seq = await platform.step()
                if args.verbose and int(platform.clock) % 3600 == 0:
                    print(
                        f"  t={platform.clock / 3600:4.1f} h: {platform.submitted:,} submitted, "
                        f"{platform.finished:,} finished, {len(PASSES):,} passes, "
                        f"{time.perf_counter() - started:.0f} s",
                        flush=True,
                    )
                if seq:
                    await settled(scheduler, seq)
                    await platform.follower.wait_for(scheduler.follower.seq)
            wall = time.perf_counter() - started
            decisions = scheduler.decisions_appended
            state = scheduler.follower.state
            info = await log.js.stream_info("SIM")
            memory = rss_mib()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await platform.follower.stop()
        restart = Scheduler(settings, log)
        t = time.perf_counter()
        await restart.start()
        await restart.follower.catch_up(timeout=120.0)  # type: ignore[union-attr]
        restart_s = time.perf_counter() - t
        await restart.stop()
        await log.close()
    ms = sorted(p * 1e3 for p in PASSES)
    print(
        f"simulated day: {args.hosts} hosts, {args.queues} queues x 4 shares, "
        f"{platform.submitted:,} jobs submitted, {platform.finished:,} finished, "
        f"{len(state.jobs):,} in the folded state at the end, wall {wall:.0f} s"
    )
    busy = sum(PASSES)
    print(
        f"  decisions: {decisions:,} = {decisions / wall:,.0f}/s of the day's wall time "
        f"(paced by the simulator), {decisions / busy:,.0f}/s of pass time ({busy:.1f} s)"
    )
    print(
        f"  passes: {len(ms):,}; min {ms[0]:.2f} p50 {statistics.median(ms):.2f} "
        f"p99 {ms[min(len(ms) - 1, int(0.99 * len(ms)))]:.2f} max {ms[-1]:.2f} ms"
    )
    print(f"  resident memory (scheduler + simulator, one process): {memory:.0f} MiB")
    print(
        f"  log: {info.state.messages:,} messages, {info.state.bytes / 1e6:.1f} MB = "
        f"{info.state.bytes / max(platform.submitted, 1):,.0f} B per job"
    )
    print(f"  restart (snapshot + tail): {restart_s:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--verbose", action="store_true", help="print each simulated hour")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(simulate(args, Path(tmp)))


if __name__ == "__main__":
    main()
