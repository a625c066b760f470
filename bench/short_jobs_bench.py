"""Short jobs end to end: N x `true` on 4 hosts through the real stack (process runtime).

Each run submits N jobs in bulk calls to a queue whose 4 hosts (one unit each)
run them, and times the first submit to the last SUCCEEDED seen by a watch.
Prints jobs/s min/median/max over the runs and the CPU per supervised attempt
(CPU of the processes the agents started: the job's wrapper and the job, here
`true`), and this process's own CPU per job (the whole stack runs in it).
Asserts nothing.

    python bench/short_jobs_bench.py [--jobs 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from queue import Queue

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client import Quartermaster, TrainingQueue, training_job
from quartermaster.client.connection import QuartermasterError
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread

UNIT = "ml.g5.xlarge"
HOSTS = 4
BULK = 250


def run_once(client: Quartermaster, queue: TrainingQueue, run: int, jobs: int) -> float:
    """Seconds from the first submit until every job of this run SUCCEEDED."""
    changes: Queue[tuple[str, int]] = Queue()

    def watch() -> None:  # changes from the moment it subscribes: start it first
        with contextlib.suppress(QuartermasterError):  # the channel closes at the end
            for change in client.watch(job_queue=queue.name, timeout=1800):
                changes.put((change.job_id, change.status))

    threading.Thread(target=watch, daemon=True).start()
    time.sleep(1.0)
    job = training_job(command=["true"], instance_type=UNIT)
    names = [f"r{run}j{i}" for i in range(jobs)]
    t0 = time.perf_counter()
    ids: set[str] = set()
    for start in range(0, jobs, BULK):
        chunk = names[start : start + BULK]
        ids.update(j.job_id for j in queue.map(job, job_names=chunk, quota_share_name="A"))
    done: set[str] = set()
    while len(done) < len(ids):
        job_id, status = changes.get(timeout=600)
        if job_id in ids and status == pb.JOB_STATUS_SUCCEEDED:
            done.add(job_id)
        elif job_id in ids and status == pb.JOB_STATUS_FAILED:
            raise RuntimeError(f"job {job_id} failed")
    return time.perf_counter() - t0


def children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = StackSettings(
            data_dir=Path(tmp), nodes=HOSTS, grpc_port=0, gpus_per_node=0, stop_grace_seconds=5
        )
        with StackThread(settings) as stack:
            client = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
            client.create_service_environment("env", {UNIT: HOSTS})
            client.create_scheduling_policy("fifo")
            client.create_job_queue("q", "env", "fifo")
            client.create_quota_share("q", "A", {UNIT: HOSTS}, "LEND_AND_BORROW")
            queue = TrainingQueue("q", client)
            run_once(client, queue, -1, HOSTS * 2)  # warm-up: hosts registered, paths hot
            rates, child_ms, own_ms = [], [], []
            for run in range(args.runs):
                child0, own0 = children_cpu(), own_cpu()
                seconds = run_once(client, queue, run, args.jobs)
                rates.append(args.jobs / seconds)
                child_ms.append((children_cpu() - child0) / args.jobs * 1e3)
                own_ms.append((own_cpu() - own0) / args.jobs * 1e3)
                print(
                    f"run {run}: {args.jobs} jobs in {seconds:.1f} s = {rates[-1]:.1f} jobs/s;"
                    f" CPU per supervised attempt {child_ms[-1]:.1f} ms;"
                    f" stack CPU per job {own_ms[-1]:.1f} ms",
                    flush=True,
                )
            client.close()
    print(f"{args.jobs} x `true` on {HOSTS} hosts, {args.runs} runs:")
    print(f"  jobs/s                       {summary(rates, '.1f')}")
    print(f"  CPU per supervised attempt   {summary(child_ms, '.1f')} ms")
    print(f"  stack CPU per job (in-proc)  {summary(own_ms, '.1f')} ms")


def summary(values: list[float], fmt: str) -> str:
    return (
        f"min {min(values):{fmt}}  median {statistics.median(values):{fmt}}"
        f"  max {max(values):{fmt}}"
    )


if __name__ == "__main__":
    main()
