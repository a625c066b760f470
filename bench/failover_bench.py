"""Scheduler failover time: kill -9 of the leading replica -> the next dispatch.

    python bench/failover_bench.py [--kills 7] [--cluster]

Starts its own nats-server (or, with --cluster, a 3-node cluster with the stream at
3 replicas) and two `python -m qm_scheduler` replicas; kills the lease holder with
SIGKILL, submits a job at once and times its dispatch by the standby; the killed
replica is restarted as the new standby before the next kill. Prints min/median/max;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path

from quartermaster.bus import JetStreamLog, KvLease
from quartermaster.embedded import EmbeddedNats
from quartermaster.embedded.nats_cluster import NatsCluster, wait_for_jetstream
from quartermaster.testing.failover import (
    DispatchWatch,
    SchedulerReplica,
    failover_once,
    scheduler_env,
    seed,
    submit,
)


async def bench(kills: int, clustered: bool, root: Path) -> None:
    servers: AbstractContextManager[EmbeddedNats | NatsCluster]
    servers = NatsCluster(root / "nats", 3) if clustered else EmbeddedNats(root / "nats")
    replicas_n = 3 if clustered else 1
    with servers as nats:
        if isinstance(nats, NatsCluster):
            await wait_for_jetstream(nats.url)
        log = await JetStreamLog.connect(nats.url, "FAILOVER", "fo", replicas=replicas_n)
        env = scheduler_env(nats.url, "FAILOVER", "fo", "failover")
        env["QM_SCHEDULER_STREAM_REPLICAS"] = str(replicas_n)
        replicas = [SchedulerReplica(n, env, root / f"{n}.log") for n in ("sa", "sb")]
        watch = DispatchWatch(log)
        try:
            await seed(log, hosts=kills + 1)
            await watch.follower.start()
            for replica in replicas:
                replica.start()
            leases = await KvLease.open(log, "failover-leases", replicas=replicas_n)
            await submit(log, "warm-up", at=2)
            await watch.until_dispatched("warm-up", timeout_s=60)
            await asyncio.sleep(2.0)
            times = []
            for kill in range(kills):
                times.append(
                    await failover_once(log, leases, replicas, watch, f"k{kill}", 3 + kill)
                )
                print(f"kill {kill + 1}: next dispatch after {times[-1]:.3f}s", flush=True)
                await asyncio.sleep(2.5)  # the restarted replica becomes the standby
            await watch.follower.catch_up()
            twice = sum(1 for n in watch.dispatches.values() if n > 1)
            print(
                f"failover (kill -9 -> next dispatch) over {kills} kills: "
                f"min {min(times):.3f}s  median {statistics.median(times):.3f}s  "
                f"max {max(times):.3f}s; jobs dispatched twice: {twice}"
            )
        finally:
            for replica in replicas:
                replica.stop()
            await watch.follower.stop()
            await log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=7)
    parser.add_argument("--cluster", action="store_true", help="3-node cluster, 3 replicas")
    args = parser.parse_args()
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="qm-failover-bench-") as root:
        asyncio.run(bench(args.kills, args.cluster, Path(root)))
    print(f"(bench took {time.monotonic() - began:.0f}s)")


if __name__ == "__main__":
    main()
