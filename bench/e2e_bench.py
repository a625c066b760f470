"""End-to-end figures on a running stack (embedded NATS and Postgres, process runtime).

Prints: submit->RUNNING latency on an idle stack, durable SubmitServiceJob throughput
(sequential, 16 concurrent clients, and bulk SubmitServiceJobs), and the time a
reclaim preemption takes to free capacity (the victim exits on SIGTERM at once, so
the grace period is not part of the figure). Asserts nothing.

    python bench/e2e_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client import Quartermaster, TrainingQueue, training_job
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread

UNIT = "ml.g5.xlarge"


def job(script: str) -> dict[str, object]:
    return training_job(command=["sh", "-c", script], instance_type=UNIT)


def wait_status(c: Quartermaster, job_id: str, status: int, timeout: float = 60) -> float:
    deadline = time.perf_counter() + timeout
    for change in c.watch(job_ids=[job_id], timeout=timeout):
        if change.status == status:
            return time.perf_counter()
        if time.perf_counter() > deadline:
            break
    raise TimeoutError(job_id)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 10 if args.quick else 30
    with tempfile.TemporaryDirectory() as tmp:
        settings = StackSettings(data_dir=Path(tmp), nodes=2, grpc_port=0, stop_grace_seconds=30)
        with StackThread(settings) as stack:
            c = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
            c.create_service_environment("env", {UNIT: 2})
            c.create_scheduling_policy("fifo")
            c.create_job_queue("q", "env", "fifo")
            c.create_quota_share("q", "A", {UNIT: 1}, "LEND_AND_BORROW")
            c.create_quota_share("q", "B", {UNIT: 1}, "LEND")
            # A second queue whose instance type has no host: its jobs stay queued, so the
            # throughput figures measure durable admission only.
            c.create_service_environment("env-bulk", {"ml.p5.48xlarge": 1})
            c.create_job_queue("bulk", "env-bulk", "fifo")
            c.create_quota_share("bulk", "BULK", {"ml.p5.48xlarge": 1}, "LEND")
            queue = TrainingQueue("q", c)
            bulk = TrainingQueue("bulk", c)
            cold = training_job(command=["true"], instance_type="ml.p5.48xlarge")

            warm = queue.submit(
                job("exit 0"), job_name="warm-up", quota_share_name="A"
            )  # first launch imports the wrapper
            wait_status(c, warm.job_id, pb.JOB_STATUS_SUCCEEDED)
            latencies = []
            for i in range(rounds):
                t0 = time.perf_counter()
                j = queue.submit(job("exit 0"), job_name=f"lat{i}", quota_share_name="A")
                latencies.append(wait_status(c, j.job_id, pb.JOB_STATUS_RUNNING) - t0)
                wait_status(c, j.job_id, pb.JOB_STATUS_SUCCEEDED)
            print(
                f"submit->RUNNING on an idle stack: p50 {statistics.median(latencies) * 1e3:.0f} ms"
                f"  p90 {pct(latencies, 0.9) * 1e3:.0f} ms  max {max(latencies) * 1e3:.0f} ms"
                f"  (n={rounds})"
            )

            # Throughput: jobs to a share with limit 0 stay queued (durable appends only).
            n = 200 if args.quick else 1000
            t0 = time.perf_counter()
            for i in range(n):
                bulk.submit(cold, job_name=f"seq{i}", quota_share_name="BULK")
            dt = time.perf_counter() - t0
            print(f"SubmitServiceJob, sequential, one client: {n / dt:,.0f} jobs/s")

            def submit_many(k: int) -> None:
                with Quartermaster(stack.address, credentials_dir=stack.credentials_dir) as own:
                    q = TrainingQueue("bulk", own)
                    for i in range(n // 16):
                        q.submit(cold, job_name=f"par{k}x{i}", quota_share_name="BULK")

            t0 = time.perf_counter()
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(submit_many, range(16)))
            dt = time.perf_counter() - t0
            print(f"SubmitServiceJob, 16 concurrent clients: {(n // 16) * 16 / dt:,.0f} jobs/s")

            batch = 500
            t0 = time.perf_counter()
            total = 0
            for b in range(4 if args.quick else 10):
                total += len(
                    bulk.map(
                        cold,
                        job_names=[f"bulk{b}x{i}" for i in range(batch)],
                        quota_share_name="BULK",
                    )
                )
            dt = time.perf_counter() - t0
            print(f"SubmitServiceJobs (bulk, {batch} per call): {total / dt:,.0f} jobs/s")

            # Reclaim: A borrows B's unit; B's job arrives; time until B's job runs.
            reclaim = []
            for i in range(5 if args.quick else 10):
                held = queue.submit(
                    job("trap 'exit 143' TERM; sleep 600 & wait"),
                    job_name=f"own{i}",
                    quota_share_name="A",
                )
                borrower = queue.submit(
                    job("trap 'exit 143' TERM; sleep 600 & wait"),
                    job_name=f"borrow{i}",
                    quota_share_name="A",
                )
                wait_status(c, held.job_id, pb.JOB_STATUS_RUNNING)
                wait_status(c, borrower.job_id, pb.JOB_STATUS_RUNNING)
                t0 = time.perf_counter()
                owner = queue.submit(job("exit 0"), job_name=f"owner{i}", quota_share_name="B")
                reclaim.append(wait_status(c, owner.job_id, pb.JOB_STATUS_SCHEDULED) - t0)
                wait_status(c, owner.job_id, pb.JOB_STATUS_SUCCEEDED)
                for j in (held, borrower):
                    j.terminate("bench")
                    wait_status(c, j.job_id, pb.JOB_STATUS_FAILED)
                time.sleep(0.5)  # let the terminated jobs' hosts come back
            print(
                f"reclaim preemption, owner's submit -> its dispatch on the freed host: "
                f"p50 {statistics.median(reclaim) * 1e3:.0f} ms  max {max(reclaim) * 1e3:.0f} ms"
            )
            c.close()


if __name__ == "__main__":
    main()
