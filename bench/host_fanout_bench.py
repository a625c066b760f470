"""Messages read by all node agents per job, against the number of hosts.

A real nats-server; N simulated hosts, each one reader as its node agent would
run it: "log" folds the whole log (a `LogFollower`, how agents read before the
host feed), "feed" reads its host's views (a `HostFeedFollower`, fed by a
`HostRelay` over this script's fold, as the scheduler runs it). The script
appends what admission, the scheduler and the agents would (configuration, N
registrations, then per job: submit, dispatch to one host, starting, running,
succeeded) and counts every message each reader took while the jobs ran.

    .venv/bin/python bench/host_fanout_bench.py [--hosts 4 64 512] [--jobs 32] [--runs 3]

Prints, per mode and host count, min/median/max over the runs of the messages
read by all readers per job (and per job and host). "log" runs at most 64 real
readers (more on one connection overrun it): each takes every message, so their
sum is scaled to the host count; "feed" runs one real reader per host.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.eventlog.host_reader import HostFeedFollower
from quartermaster.eventlog.host_relay import HostRelay

UNIT = "ml.g5.xlarge"
QUEUE, SHARE = "q", "QS1"
MAX_LOG_READERS = 64


class Counting:
    """A whole-log reader that counts what it took (the agent's old read side)."""

    def __init__(self, event_log: JetStreamLog) -> None:
        self.follower = LogFollower(event_log)
        self.messages_read = 0
        self.follower.listen(self._count)

    def _count(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        self.messages_read += 1


async def append(event_log: JetStreamLog, subject: str, *events: ev.Event) -> int:
    return await event_log.append(subject, encode_batch(list(events)))


async def configure(event_log: JetStreamLog, hosts: int) -> None:
    now = time.time()
    limits = (ev.CapacityLimit(UNIT, hosts),)
    await append(
        event_log,
        subjects.requests(event_log.prefix),
        ev.ServiceEnvironmentCreated(at=now, name="env", capacity_limits=limits),
        ev.SchedulingPolicyCreated(at=now, name="fifo"),
        ev.JobQueueCreated(at=now, name=QUEUE, service_environment="env", scheduling_policy="fifo"),
        ev.QuotaShareCreated(
            at=now,
            job_queue=QUEUE,
            name=SHARE,
            capacity_limits=limits,
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
        ),
    )
    for n in range(hosts):
        host = f"h{n}"
        registered = ev.HostRegistered(at=now, host_id=host, instance_type=UNIT)
        await append(event_log, subjects.reports(host, event_log.prefix), registered)


async def run_jobs(event_log: JetStreamLog, hosts: int, jobs: int) -> int:
    p = event_log.prefix
    for n in range(jobs):
        job, host, now = f"j{n}", f"h{n % hosts}", time.time()
        await append(
            event_log,
            subjects.requests(p),
            ev.JobSubmitted(
                at=now,
                job_id=job,
                job_name=job,
                job_queue=QUEUE,
                quota_share=SHARE,
                instance_type=UNIT,
                warm_pool_key=ev.WarmPoolKey(instance_type=UNIT),
                payload="{}",
            ),
        )
        dispatched = ev.JobDispatched(at=now, job_id=job, attempt=1, hosts=(host,))
        await append(event_log, subjects.decisions(QUEUE, p), dispatched)
        for report in (
            ev.JobStarting(at=now, job_id=job, attempt=1, host=host),
            ev.JobRunning(at=now, job_id=job, attempt=1, host=host),
            ev.JobSucceeded(at=now, job_id=job, attempt=1, host=host, exit_code=0),
        ):
            await append(event_log, subjects.reports(host, p), report)
    return await event_log.last_seq()


async def one_run(url: str, mode: str, hosts: int, jobs: int, run: int) -> float:
    event_log = await JetStreamLog.connect(url, f"FAN{run}{mode}{hosts}", f"fan{run}{mode}{hosts}")
    try:
        fold = LogFollower(event_log)
        relay = HostRelay(fold)
        await fold.start()
        await relay.start()
        await configure(event_log, hosts)
        await fold.catch_up(timeout=None)
        await relay.flush(timeout=120)
        readers: list[Counting | HostFeedFollower] = []
        # Each whole-log reader takes every message, whatever its host: past
        # MAX_LOG_READERS real ones (one connection here) the sum is scaled to `hosts`.
        real = min(hosts, MAX_LOG_READERS) if mode == "log" else hosts
        for n in range(real):
            if mode == "log":
                counting = Counting(event_log)
                await counting.follower.start()
                readers.append(counting)
            else:
                feed = HostFeedFollower(event_log, f"h{n}")
                await feed.start()
                readers.append(feed)
        for reader in readers:
            if isinstance(reader, Counting):
                await reader.follower.catch_up(timeout=None)
            else:
                await reader.catch_up(timeout=None)
        before = sum(r.messages_read for r in readers)
        last = await run_jobs(event_log, hosts, jobs)
        await fold.wait_for(last, timeout=None)
        await relay.flush(timeout=120)
        for reader in readers:
            if isinstance(reader, Counting):
                await reader.follower.wait_for(last, timeout=None)
            else:
                await reader.catch_up(timeout=None)
        read = sum(r.messages_read for r in readers) - before
        for reader in readers:
            await (reader.follower.stop() if isinstance(reader, Counting) else reader.stop())
        await relay.stop()
        await fold.stop()
        await event_log.delete_stream()
        return read * hosts / real / jobs
    finally:
        await event_log.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[4, 64, 512])
    parser.add_argument("--jobs", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["log", "feed"], choices=["log", "feed"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as nats:
        print(f"{'mode':<5} {'hosts':>6}  messages read by all agents per job (min/median/max)")
        for mode in args.modes:
            for hosts in args.hosts:
                figures = [
                    await one_run(nats.url, mode, hosts, args.jobs, run) for run in range(args.runs)
                ]
                low, mid, high = min(figures), statistics.median(figures), max(figures)
                print(
                    f"{mode:<5} {hosts:>6}  {low:9.1f} / {mid:9.1f} / {high:9.1f}"
                    f"   per host: {mid / hosts:.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    asyncio.run(main())
