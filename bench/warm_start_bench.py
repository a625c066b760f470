"""Warm against cold starts on the docker runtime: dispatch -> RUNNING, with a local registry.

One node agent (docker runtime, `registry` = a docker-registry of this run on
127.0.0.1) follows a real nats-server; this script appends what admission and
the scheduler would (submit, dispatch, warm pool decisions) and times each
JobDispatched append until the agent's JobRunning report is folded. Each round:
a cold job (its image, a base plus a random layer of --layer-mb MB, removed
from the engine first, so it is really pulled; one input channel of
--input-mb MB staged), then a matching job placed on its warm pool. Prints
min/median/max of each and the ratio, and the median of each start phase.
Asserts nothing.

    python bench/warm_start_bench.py [--rounds 3] [--layer-mb 300] [--input-mb 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from qm_node_agent import NodeAgent, NodeSettings, RuntimeKind
from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.testing.registry import LocalRegistry, build_training_image, push_only

UNIT = "ml.g5.xlarge"
BASE = "quartermaster/job-runner:test"
IMAGE = "qm-bench/warm-train:1"
HOST = "h1"


class Driver:
    """Appends requests and decisions; folds the log; notes when reports arrive."""

    def __init__(self, event_log: JetStreamLog) -> None:
        self.log = event_log
        self.follower = LogFollower(event_log)
        self.running: dict[str, tuple[float, ev.JobRunning]] = {}

    def _seen(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        for event in events:
            if isinstance(event, ev.JobRunning) and event.job_id not in self.running:
                self.running[event.job_id] = (time.perf_counter(), event)

    async def start(self) -> None:
        self.follower.listen(self._seen)
        await self.follower.start()
        limits = (ev.CapacityLimit(UNIT, 1),)
        await self.request(
            ev.ServiceEnvironmentCreated(at=time.time(), name="env", capacity_limits=limits),
            ev.SchedulingPolicyCreated(at=time.time(), name="fifo"),
            ev.JobQueueCreated(
                at=time.time(), name="q", service_environment="env", scheduling_policy="fifo"
            ),
            ev.QuotaShareCreated(
                at=time.time(),
                job_queue="q",
                name="A",
                capacity_limits=limits,
                strategy=ev.SharingStrategy.LEND_AND_BORROW,
            ),
        )

    async def request(self, *events: ev.Event) -> None:
        await self.log.append(subjects.requests(self.log.prefix), encode_batch(list(events)))

    async def decide(self, *events: ev.Event) -> float:
        at = time.perf_counter()
        await self.log.append(subjects.decisions("q", self.log.prefix), encode_batch(list(events)))
        return at

    async def until(self, what: str, done: Callable[[], bool], timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError(what)
            await asyncio.sleep(0.01)

    async def run_job(self, job_id: str, payload: str, warm_pool: str | None) -> float:
        """Submit, dispatch, and return dispatch -> RUNNING seconds (once it SUCCEEDED)."""
        await self.request(
            ev.JobSubmitted(
                at=time.time(),
                job_id=job_id,
                job_name=job_id,
                job_queue="q",
                quota_share="A",
                instance_type=UNIT,
                keep_alive_seconds=600,
                warm_pool_key=ev.WarmPoolKey(instance_type=UNIT),
                payload=payload,
            )
        )
        await self.until("submitted", lambda: job_id in self.follower.state.jobs)
        dispatch = ev.JobDispatched(
            at=time.time(), job_id=job_id, attempt=1, hosts=(HOST,), warm_pool=warm_pool
        )
        t0 = await self.decide(dispatch)
        await self.until(f"{job_id} RUNNING", lambda: job_id in self.running)
        state = self.follower.state
        await self.until(f"{job_id} ended", lambda: state.jobs[job_id].status == "SUCCEEDED")
        return self.running[job_id][0] - t0

    async def keep_pool(self, job_id: str, chain: str) -> None:
        now = time.time()
        await self.decide(
            ev.WarmPoolAvailable(
                at=now,
                job_id=job_id,
                hosts=(HOST,),
                expires_at=now + 600,
                chain_id=chain,
                chain_started_at=now,
            )
        )

    async def end_pool(self, job_id: str) -> None:
        await self.decide(
            ev.WarmPoolTerminated(
                at=time.time(),
                job_id=job_id,
                reason=ev.WarmPoolTerminationReason.EXPIRED,
                billable_seconds=0,
            )
        )


def engine_has(kind: str, name: str) -> bool:
    return subprocess.run(["docker", kind, "inspect", name], capture_output=True).returncode == 0


def sandbox_ready(chain: str) -> bool:
    return engine_has("container", f"qm-sandbox-h1-{chain}")


def chain_freed(chain: str) -> bool:
    return not sandbox_ready(chain) and not engine_has("volume", f"qm-vol-h1-{chain}")


def job_payload(inputs: Path) -> str:
    return json.dumps(
        {
            "AlgorithmSpecification": {
                "TrainingImage": IMAGE,
                "ContainerEntrypoint": ["sh", "-c", "ls /opt/ml/input/data/train >/dev/null"],
            },
            "RoleArn": "arn:aws:iam::123456789012:role/bench",
            "ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1, "VolumeSizeInGB": 50},
            "InputDataConfig": [
                {
                    "ChannelName": "train",
                    "DataSource": {"S3DataSource": {"S3Uri": f"file://{inputs}"}},
                }
            ],
        }
    )


async def bench(args: argparse.Namespace, tmp: Path, registry: str) -> None:
    inputs = tmp / "dataset"
    inputs.mkdir()
    for part in range(max(1, args.input_mb // 10)):
        (inputs / f"part-{part}").write_bytes(os.urandom(min(args.input_mb, 10) * 1_048_576))
    payload = job_payload(inputs)
    with EmbeddedNats(tmp / "nats") as nats:
        event_log = await JetStreamLog.connect(nats.url, "BENCH", "bench")
        driver = Driver(event_log)
        await driver.start()
        settings = NodeSettings(
            host_id=HOST,
            instance_type=UNIT,
            data_dir=tmp / "agent",
            gpu_count=0,
            runtime=RuntimeKind.DOCKER,
            registry=registry,
            stream="BENCH",
            subject_prefix="bench",
            heartbeat_seconds=1.0,
            stop_grace_seconds=2.0,
            address="127.0.0.1",
            read_whole_log=True,  # no scheduler here to relay the host's views
        )
        cold_s, warm_s = [], []
        phases: dict[str, list[ev.StartPhases]] = {"cold": [], "warm": []}
        async with NodeAgent(settings, event_log):
            await driver.until("host", lambda: HOST in driver.follower.state.hosts)
            for i in range(args.rounds):
                cold_id, warm_id = f"cold{i}", f"warm{i}"
                cold_s.append(await driver.run_job(cold_id, payload, None))
                await driver.keep_pool(cold_id, cold_id)
                await driver.until("sandbox", partial(sandbox_ready, cold_id))
                warm_s.append(await driver.run_job(warm_id, payload, cold_id))
                await driver.keep_pool(warm_id, cold_id)
                await driver.end_pool(warm_id)
                await driver.until("pool freed", partial(chain_freed, cold_id))
                subprocess.run(["docker", "rmi", f"{registry}/{IMAGE}"], capture_output=True)
                for kind, job_id in (("cold", cold_id), ("warm", warm_id)):
                    measured = driver.running[job_id][1].start_phases
                    assert measured is not None
                    phases[kind].append(measured)
                print(
                    f"round {i}: cold {cold_s[-1] * 1e3:.0f} ms  warm {warm_s[-1] * 1e3:.0f} ms",
                    flush=True,
                )
        await driver.follower.stop()
        await event_log.close()
    print(
        f"dispatch -> RUNNING on the docker runtime, {args.rounds} rounds, "
        f"image {BASE} + {args.layer_mb} MB layer pulled from {registry}, "
        f"{args.input_mb} MB staged:"
    )
    print(f"  cold  {summary(cold_s)}")
    print(f"  warm  {summary(warm_s)}")
    ratio = statistics.median(cold_s) / statistics.median(warm_s)
    print(f"  warm is {ratio:.1f}x faster (median against median)")
    for kind, seen in phases.items():
        print(
            f"  {kind} phases (median s): pull {med(p.pull_s for p in seen):.3f}"
            f"  volume {med(p.volume_s for p in seen):.3f}"
            f"  staging {med(p.staging_s for p in seen):.3f}"
            f"  container {med(p.container_s for p in seen):.3f}"
        )


def med(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def summary(seconds: list[float]) -> str:
    ms = [s * 1e3 for s in seconds]
    return f"min {min(ms):.0f} ms  median {statistics.median(ms):.0f} ms  max {max(ms):.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layer-mb", type=int, default=300)
    parser.add_argument("--input-mb", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalRegistry(Path(tmp) / "registry") as local:
        build_training_image("qm-bench/warm-build:1", BASE, args.layer_mb)
        push_only("qm-bench/warm-build:1", local.address, IMAGE)
        try:
            asyncio.run(bench(args, Path(tmp), local.address))
        finally:
            subprocess.run(["docker", "rmi", "-f", f"{local.address}/{IMAGE}"], capture_output=True)


if __name__ == "__main__":
    main()
