"""What a 2 GiB checkpoint upload costs the rest of the node agents' work (issue #28).

A `qm up` stack in this process (embedded NATS, Postgres and SeaweedFS; 2 hosts; heartbeats
every 0.5 s). In each run, two phases in alternating order, each with a holder job on one
host that copies the same 2 GiB of random bytes into /opt/ml/checkpoints and then sleeps:

- upload: the holder has a CheckpointConfig, so its agent uploads the 2 GiB while the
  phase lasts (from the copy's end to the JobCheckpointed of that round, so up to one
  2 s scan interval is part of it);
- quiet: the same copy with no CheckpointConfig (the same disk writes, no upload), for
  as long as the upload phase took.

Meanwhile idle jobs (`exit 0`) run one after another on the other host, and every host's
heartbeats are timed where the scheduler folds them. Prints, per phase, min/median/max over
the runs of: the heartbeats' worst lateness (gap beyond the 0.5 s period), the median
submit->RUNNING of the idle jobs, and the upload's rate; then the upload phase's excess
over the quiet one. Asserts nothing.

    python bench/checkpoint_bench.py [--runs 3] [--gib 2]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e_bench import QueueWatch

import qm_node_agent.agent as agent_module
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client import Quartermaster, TrainingQueue, training_job
from quartermaster.objectstore import RoleMap, parse_s3_uri
from quartermaster.objectstore.store import ObjectStore
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread

UNIT = "ml.g5.xlarge"
HEARTBEAT_S = 0.5


class Timeline:
    """When each host's heartbeat was stored (its agent's own send, patched to note the
    time) and each job's checkpoint rounds, as the scheduler folds them."""

    def __init__(self) -> None:
        self.beats: dict[str, list[float]] = {}
        self.rounds: dict[str, list[tuple[ev.JobCheckpointed, float]]] = {}
        self._lock = threading.Lock()
        original = agent_module.send_beat

        async def timed(js: Any, stream: str, beat: Any) -> None:
            await original(js, stream, beat)
            self.beats.setdefault(beat.host_id, []).append(time.perf_counter())

        agent_module.send_beat = timed  # type: ignore[assignment]

    def follow(self, stack: StackThread) -> None:
        stack.stack.parts["scheduler"].follower.listen(self._on_folded)

    def _on_folded(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        now = time.perf_counter()
        with self._lock:
            for event in events:
                if isinstance(event, ev.JobCheckpointed):
                    self.rounds.setdefault(event.job_id, []).append((event, now))

    def checkpointed_at(self, job_id: str, size: int) -> float | None:
        """When a round of the job that put `size` bytes or more up was folded."""
        with self._lock:
            done = [at for r, at in self.rounds.get(job_id, []) if r.bytes >= size]
        return done[0] if done else None

    def worst_lateness_ms(self, start: float, end: float) -> float:
        """The largest heartbeat gap beyond the period, over gaps ending in [start, end]."""
        late = []
        for beats in list(self.beats.values()):
            for before, after in itertools.pairwise(beats):
                if start <= after <= end:
                    late.append((after - before - HEARTBEAT_S) * 1e3)
        if not late:
            raise RuntimeError("no heartbeats in the phase")
        return max(late)


def wait_for(path: Path, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)
    return time.perf_counter()


def idle_jobs(
    queue: TrainingQueue, watch: QueueWatch, name: str, stop: Callable[[], bool]
) -> list[float]:
    """`exit 0` jobs one after another until `stop()` (at least 3); each one's
    submit->RUNNING in ms."""
    latencies: list[float] = []
    while not stop() or len(latencies) < 3:
        t0 = time.perf_counter()
        job = queue.submit(
            training_job(command=["sh", "-c", "exit 0"], instance_type=UNIT),
            job_name=f"{name}-{len(latencies)}",
            quota_share_name="A",
        )
        running = watch.wait(job.job_id, pb.JOB_STATUS_RUNNING)
        latencies.append((running.perf - t0) * 1e3)
        watch.wait(job.job_id, pb.JOB_STATUS_SUCCEEDED)
    return latencies


def raw_upload_rate(store: ObjectStore, data: Path, tag: str) -> float:
    """MiB/s of the same file put straight to the same store by the same adapter."""
    began = time.perf_counter()
    size = store.upload(data, parse_s3_uri(f"s3://quartermaster/bench/raw-{tag}"))
    return size / 2**20 / (time.perf_counter() - began)


class Phase:
    def __init__(self, lateness_ms: float, start_ms: float, seconds: float, rate: float) -> None:
        self.lateness_ms = lateness_ms
        self.start_ms = start_ms  # median submit->RUNNING of the idle jobs
        self.seconds = seconds
        self.rate = rate  # MiB/s of the upload (0 when quiet)


def phase(
    queue: TrainingQueue,
    watch: QueueWatch,
    timeline: Timeline,
    data: Path,
    size: int,
    tag: str,
    upload: bool,
    seconds: float,
) -> Phase:
    marker = data.parent / f"{tag}.copied"
    script = (
        f"mkdir -p /opt/ml/checkpoints && cp {data} /opt/ml/checkpoints/model.bin"
        f" && touch {marker} && sleep 600"
    )
    checkpoint = f"s3://quartermaster/bench/{tag}/" if upload else None
    holder = queue.submit(
        training_job(
            command=["sh", "-c", script], instance_type=UNIT, checkpoint_s3_uri=checkpoint
        ),
        job_name=f"holder-{tag}",
        quota_share_name="A",
    )
    watch.wait(holder.job_id, pb.JOB_STATUS_RUNNING)
    start = wait_for(marker)
    if upload:
        latencies = idle_jobs(
            queue, watch, tag, lambda: timeline.checkpointed_at(holder.job_id, size) is not None
        )
        end = timeline.checkpointed_at(holder.job_id, size) or time.perf_counter()
    else:
        latencies = idle_jobs(queue, watch, tag, lambda: time.perf_counter() > start + seconds)
        end = start + seconds
    lateness = timeline.worst_lateness_ms(start, end)
    holder.terminate("phase over")
    watch.wait(holder.job_id, pb.JOB_STATUS_FAILED)
    marker.unlink()
    took = end - start
    return Phase(
        lateness, statistics.median(latencies), took, size / 2**20 / took if upload else 0.0
    )


def triple(values: list[float], digits: int = 1) -> str:
    return " / ".join(
        f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gib", type=float, default=2.0)
    args = parser.parse_args()
    size = int(args.gib * 2**30)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "checkpoint.bin"
        with open(data, "wb") as out:
            for _ in range(0, size, 64 * 2**20):
                out.write(os.urandom(min(64 * 2**20, size - out.tell())))
        settings = StackSettings(
            data_dir=Path(tmp) / "stack",
            nodes=2,
            grpc_port=0,
            stop_grace_seconds=5,
            heartbeat_seconds=HEARTBEAT_S,
        )
        timeline = Timeline()
        with StackThread(settings) as stack:
            c = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
            c.create_service_environment("env", {UNIT: 2})
            c.create_scheduling_policy("fifo")
            c.create_job_queue("q", "env", "fifo")
            c.create_quota_share("q", "A", {UNIT: 2}, "LEND_AND_BORROW")
            queue = TrainingQueue("q", c)
            timeline.follow(stack)
            watch = QueueWatch(stack.address, stack.credentials_dir, "q")
            idle_jobs(queue, watch, "warm-up", lambda: True)
            roles = RoleMap.load(Path(settings.data_dir) / "credentials" / "roles.json")
            access = roles.default_access
            assert access is not None
            store = ObjectStore(access)
            raw: list[float] = []
            phases: dict[bool, list[Phase]] = {True: [], False: []}
            seconds = 10.0
            for run in range(args.runs):
                raw.append(raw_upload_rate(store, data, str(run)))
                print(f"run {run + 1} raw put of the file: {raw[-1]:.0f} MiB/s")
                order = (True, False) if run % 2 == 0 else (False, True)
                for upload in order:
                    got = phase(
                        queue,
                        watch,
                        timeline,
                        data,
                        size,
                        f"r{run}{'u' if upload else 'q'}",
                        upload,
                        seconds,
                    )
                    if upload:
                        seconds = got.seconds
                    phases[upload].append(got)
                    print(
                        f"run {run + 1} {'upload' if upload else 'quiet '}: {got.seconds:5.1f} s,"
                        f" heartbeat worst lateness {got.lateness_ms:6.1f} ms,"
                        f" idle submit->RUNNING median {got.start_ms:6.1f} ms"
                        + (f", upload {got.rate:.0f} MiB/s" if upload else "")
                    )
            watch.close()
            c.close()
    up, quiet = phases[True], phases[False]
    print(f"\n{args.gib:g} GiB checkpoint upload, {args.runs} runs (min / median / max):")
    print(f"  raw put of the same file          {triple(raw, 0)} MiB/s")
    print(
        f"  checkpoint round (scan to report) {triple([p.rate for p in up], 0)} MiB/s,"
        f" {triple([p.rate / r for p, r in zip(up, raw, strict=True)], 2)} of raw"
    )
    print(f"  heartbeat worst lateness, upload  {triple([p.lateness_ms for p in up])} ms")
    print(f"  heartbeat worst lateness, quiet   {triple([p.lateness_ms for p in quiet])} ms")
    print(f"  idle submit->RUNNING, upload      {triple([p.start_ms for p in up])} ms")
    print(f"  idle submit->RUNNING, quiet       {triple([p.start_ms for p in quiet])} ms")
    late = [u.lateness_ms - q.lateness_ms for u, q in zip(up, quiet, strict=True)]
    start = [u.start_ms - q.start_ms for u, q in zip(up, quiet, strict=True)]
    print(f"  excess over quiet, per run: heartbeats {triple(late)} ms, start {triple(start)} ms")


if __name__ == "__main__":
    main()
