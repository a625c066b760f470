"""Scheduler restart from its snapshot: read time, restore time, memory per job.

    python bench/scheduler_restore_bench.py [--jobs 100000] [--runs 3]

Builds a state of `--jobs` live jobs (RUNNABLE but for the ones on the 2,000 busy
hosts; each with a 600-byte payload and two tags, as a real submission has),
stores the scheduler's lean snapshot in a real nats-server's object store, then
starts `--runs` fresh processes that each restore it as the scheduler does
(`SnapshotStore.load_state`) and report the object-store read, the decode and
reindex (wall and this process's CPU time: the machine may be shared), and resident
memory added per job. Prints min/median/max; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from qm_scheduler.snapshots import SnapshotStore
from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.core import State, decide, fold
from quartermaster.core.snapshot import take
from quartermaster.embedded import EmbeddedNats

UNIT = "ml.g5.xlarge"
STREAM = "RESTORE"
BUCKET = "bench-snapshots"
PAYLOAD = json.dumps({"HyperParameters": {f"param{i}": "x" * 20 for i in range(20)}})[:600]


def build(jobs: int, queues: int = 10, shares: int = 20, hosts: int = 2000) -> State:
    state = State()
    own = hosts // (queues * shares)
    fold(
        state,
        ev.ServiceEnvironmentCreated(
            at=0.0, name="env", capacity_limits=(ev.CapacityLimit(UNIT, hosts),)
        ),
    )
    fold(state, ev.SchedulingPolicyCreated(at=0.0, name="fifo"))
    for q in range(queues):
        queue = f"q{q:02d}"
        fold(
            state,
            ev.JobQueueCreated(
                at=0.0, name=queue, service_environment="env", scheduling_policy="fifo"
            ),
        )
        for s in range(shares):
            fold(
                state,
                ev.QuotaShareCreated(
                    at=0.0,
                    job_queue=queue,
                    name=f"s{s:02d}",
                    capacity_limits=(ev.CapacityLimit(UNIT, own),),
                    strategy=ev.SharingStrategy.LEND_AND_BORROW,
                ),
            )
    for i in range(hosts):
        fold(state, ev.HostRegistered(at=0.0, host_id=f"h{i:05d}", instance_type=UNIT))
    for j in range(jobs):
        fold(
            state,
            ev.JobSubmitted(
                at=1 + j * 1e-5,
                job_id=f"{j:032x}",
                job_name=f"train-{j}",
                job_queue=f"q{j % queues:02d}",
                quota_share=f"s{(j // queues) % shares:02d}",
                instance_type=UNIT,
                scheduling_priority=j % 10,
                payload=PAYLOAD,
                tags={"team": f"t{j % 7}", "project": "bench"},
            ),
        )
    while decisions := decide(state):
        for decision in decisions:
            fold(state, decision)
    return state


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def child(url: str) -> None:
    """One restart: what the scheduler does at start, measured."""
    log = await JetStreamLog.connect(url, stream=STREAM, subjects_prefix="restore")
    store = await SnapshotStore.open(log, BUCKET)
    gc.collect()
    before = rss_bytes()
    started = time.perf_counter()
    data = await store.load()
    read = time.perf_counter() - started
    assert data is not None
    size = len(data)
    del data
    started, cpu = time.perf_counter(), time.process_time()
    restored = await store.load_state()  # read again: the whole path, as at a start
    whole = time.perf_counter() - started
    cpu = time.process_time() - cpu
    assert restored is not None
    state, _ = restored
    gc.collect()
    after = rss_bytes()
    queued = sum(len(v) for v in state.runnable.values())
    print(
        json.dumps(
            {
                "read_s": read,
                "restore_s": whole,
                "restore_cpu_s": cpu,
                "bytes": size,
                "jobs": len(state.jobs),
                "queued": queued,
                "rss_per_job": (after - before) / len(state.jobs),
            }
        )
    )
    await log.close()


async def parent(jobs: int, runs: int) -> None:
    t = time.perf_counter()
    state = build(jobs)
    print(f"built {len(state.jobs):,} live jobs in {time.perf_counter() - t:.1f} s")
    with tempfile.TemporaryDirectory() as tmp, EmbeddedNats(Path(tmp) / "nats") as nats:
        log = await JetStreamLog.connect(nats.url, stream=STREAM, subjects_prefix="restore")
        store = await SnapshotStore.open(log, BUCKET)
        t = time.perf_counter()
        data = take(state, 1, lean=True)
        encode = time.perf_counter() - t
        full = len(take(state, 1))
        await store.save(data)
        await log.close()
        print(
            f"snapshot: {len(data) / 1e6:.1f} MB lean ({len(data) / len(state.jobs):.0f} B/job; "
            f"with payloads {full / 1e6:.1f} MB), encoded in {encode:.2f} s"
        )
        del state
        results = []
        for _ in range(runs):
            out = subprocess.run(
                [sys.executable, __file__, "--child", nats.url],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
    for key, label, scale, unit in (
        ("read_s", "object-store read", 1e3, "ms"),
        ("restore_s", "read + decode + reindex", 1e3, "ms"),
        ("restore_cpu_s", "the same, CPU time", 1e3, "ms"),
        ("rss_per_job", "resident memory per job", 1 / 1024, "KiB"),
    ):
        values = [r[key] * scale for r in results]
        print(
            f"{label:>26}: min {min(values):8.2f} median {statistics.median(values):8.2f} "
            f"max {max(values):8.2f} {unit}  ({runs} restarts, {results[0]['jobs']:,} jobs, "
            f"{results[0]['queued']:,} queued)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", metavar="NATS_URL")
    args = parser.parse_args()
    if args.child:
        asyncio.run(child(args.child))
    else:
        asyncio.run(parent(args.jobs, args.runs))


if __name__ == "__main__":
    main()
