"""End-to-end figures on a running stack (embedded NATS and Postgres, process runtime).

Prints: submit->RUNNING latency on an idle stack, durable SubmitServiceJob throughput
(sequential, 16 concurrent clients, and bulk SubmitServiceJobs), and the time a
reclaim preemption takes to free capacity (the victim exits on SIGTERM at once, so
the grace period is not part of the figure). Asserts nothing.

The latency client (its submits and its watch) runs in a process of its own by
default, as a user's would: a blocking gRPC client in the stack's process holds the
GIL for its own threads and stalls the stack's loop. `--client thread` runs it in
the stack's process (how this bench measured before).

    python bench/e2e_bench.py [--quick] [--latency-only] [--client process|thread]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import grpc
from loop_callbacks import LoopCallbacks

from qm_node_agent.agent import NodeAgent
from quartermaster import events as ev
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


class Seen(NamedTuple):
    perf: float  # time.perf_counter() when the watch got the change
    wall: float  # time.time() then


class QueueWatch:
    """One watch on a queue, opened before the jobs are submitted: a watch opened after
    the submit starts from the job's state then, and a short job may be past RUNNING."""

    def __init__(self, address: str, credentials_dir: Path | None, queue: str) -> None:
        self._seen: dict[tuple[str, int], Seen] = {}
        self._changed = threading.Condition()
        self._client = Quartermaster(address, credentials_dir=credentials_dir)
        self._closed = False
        threading.Thread(target=self._follow, args=(queue,), daemon=True).start()
        time.sleep(0.5)  # subscribed (changes from then on)

    def _follow(self, queue: str) -> None:
        """Resumes after the last change seen if the stream breaks (say why, on stderr)."""
        after = 0
        while True:
            request = pb.WatchServiceJobsRequest(job_queue=queue, after_sequence=after)
            try:
                for change in self._client.jobs.WatchServiceJobs(request, timeout=3600):
                    seen = Seen(time.perf_counter(), time.time())
                    after = max(after, change.sequence)
                    with self._changed:
                        self._seen.setdefault((change.job_id, change.status), seen)
                        self._changed.notify_all()
            except grpc.RpcError as err:
                if self._closed or err.code() is grpc.StatusCode.CANCELLED:
                    return  # the channel closed at the end
                print(f"queue watch broke ({err.code().name}); resuming", file=sys.stderr)
                time.sleep(0.1)

    def close(self) -> None:
        self._closed = True
        self._client.close()

    def wait(self, job_id: str, status: int, timeout: float = 60) -> Seen:
        with self._changed:
            if not self._changed.wait_for(lambda: (job_id, status) in self._seen, timeout):
                seen = sorted(s for (j, s) in self._seen if j == job_id)
                raise TimeoutError(f"{job_id}: status {status} not seen (seen: {seen})")
            return self._seen[(job_id, status)]


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


# Hops of one job, in order: each is the wall-clock time (time.time()) it was reached.
HOPS = (
    ("call", "the client calls SubmitServiceJob"),
    ("submitted", "admission made JobSubmitted (its `at`)"),
    ("sched_folded_submit", "the scheduler folded JobSubmitted"),
    ("sched_folded_dispatch", "the scheduler folded its JobDispatched"),
    ("agent_read", "the node agent read the dispatch to its host (its fold or a view)"),
    ("starting", "the agent made JobStarting (its `at`)"),
    ("running", "the agent made JobRunning (its `at`)"),
    ("sched_folded_running", "the scheduler folded JobRunning"),
    ("client_running", "the client's watch saw RUNNING"),
)


class Hops:
    """Per-hop timeline of each job: listeners on the scheduler's and agents' read sides.

    Every part runs in this process, so one wall clock serves them all; the listeners
    run on the stack's loop and only note a time.
    """

    def __init__(self, stack: StackThread) -> None:
        self._marks: dict[str, dict[str, float]] = {}
        self._ids: dict[str, str] = {}  # job name -> id
        self._names: dict[str, str] = {}  # job id -> name
        self._pending: dict[str, dict[str, float]] = {}  # job name -> marks before its id
        parts = stack.stack.parts
        parts["scheduler"].follower.listen(self._on_scheduler)
        for part in parts.values():
            read_side = getattr(part, "read_side", None)  # None: an agent older than it
            if isinstance(part, NodeAgent) and read_side is not None:
                read_side.listen(self._agent_listener(part))

    def _mark(self, job_id: str, hop: str, at: float | None = None) -> None:
        self._marks.setdefault(job_id, {}).setdefault(hop, time.time() if at is None else at)

    def call(self, name: str, at: float | None = None) -> None:
        self._pending[name] = {"call": time.time() if at is None else at}

    def submitted(self, name: str, job_id: str, at: float | None = None) -> None:
        self._pending.setdefault(name, {})["returned"] = time.time() if at is None else at
        self._ids[name] = job_id
        self._names[job_id] = name
        for hop, at in self._pending.pop(name, {}).items():
            self._mark(job_id, hop, at)

    def saw_running(self, job_id: str, at: float) -> None:
        self._mark(job_id, "client_running", at)

    def _on_scheduler(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        now = time.time()
        for event in events:
            if isinstance(event, ev.JobSubmitted):
                self._mark(event.job_id, "submitted", event.at)
                self._mark(event.job_id, "sched_folded_submit", now)
            elif isinstance(event, ev.JobDispatched):
                self._mark(event.job_id, "sched_folded_dispatch", now)
            elif isinstance(event, ev.JobStarting):
                self._mark(event.job_id, "starting", event.at)
            elif isinstance(event, ev.JobRunning):
                self._mark(event.job_id, "running", event.at)
                self._mark(event.job_id, "sched_folded_running", now)

    def _agent_listener(self, agent: NodeAgent) -> Callable[[int, str, list[ev.AnyEvent]], None]:
        def on_read(seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
            now = time.time()
            host = agent.host_id
            if events:  # a folded message (a share of the stack's fold, or the whole log)
                for event in events:
                    if isinstance(event, ev.JobDispatched) and host in event.hosts:
                        self._mark(event.job_id, "agent_read", now)
                return
            for job in agent.state.jobs.values():  # a host view: only this host's jobs
                if host in job.hosts:
                    self._mark(job.job_id, "agent_read", now)

        return on_read

    def print(self) -> None:
        """Each hop's share of the path: ms since the previous hop, min/median/max."""
        rows = [m for job_id, m in self._marks.items() if job_id in self._names]
        print(f"per-hop timeline (ms since the previous hop; {len(rows)} jobs):")
        for index, (hop, what) in enumerate(HOPS[1:], start=1):
            gaps = []
            for m in rows:  # from the nearest earlier hop the row has (older code: fewer)
                earlier = [h for h, _ in HOPS[:index] if h in m]
                if hop in m and earlier:
                    gaps.append((m[hop] - m[earlier[-1]]) * 1e3)
            if gaps:
                print(
                    f"  {hop:<22} min {min(gaps):6.2f}  median {statistics.median(gaps):6.2f}"
                    f"  max {max(gaps):6.2f}   {what}"
                )
        returned = [(m["returned"] - m["call"]) * 1e3 for m in rows if "returned" in m]
        if returned:
            print(
                f"  (the submit call returned {min(returned):.2f} / "
                f"{statistics.median(returned):.2f} / {max(returned):.2f} ms after the call)"
            )


class Timed(NamedTuple):
    """One latency job as its client saw it (wall clock, time.time())."""

    name: str
    job_id: str
    call: float
    returned: float
    running: float  # the client's watch saw RUNNING
    latency: float  # seconds from the call to that (perf_counter)


def latency_run(address: str, credentials_dir: Path | None, run: int, rounds: int) -> list[Timed]:
    """`rounds` jobs one after another: submit, wait to see it RUNNING, then SUCCEEDED."""
    client = Quartermaster(address, credentials_dir=credentials_dir)
    queue = TrainingQueue("q", client)
    changes = QueueWatch(address, credentials_dir, "q")
    try:
        # Warm-up: this client's channel and watch, and (at first) the hosts' first launch.
        warm = queue.submit(job("exit 0"), job_name=f"warm-up{run}", quota_share_name="A")
        changes.wait(warm.job_id, pb.JOB_STATUS_SUCCEEDED)
        timed = []
        for i in range(rounds):
            name = f"lat{run}x{i}"
            t0, call = time.perf_counter(), time.time()
            j = queue.submit(job("exit 0"), job_name=name, quota_share_name="A")
            returned = time.time()
            running = changes.wait(j.job_id, pb.JOB_STATUS_RUNNING)
            timed.append(Timed(name, j.job_id, call, returned, running.wall, running.perf - t0))
            changes.wait(j.job_id, pb.JOB_STATUS_SUCCEEDED)
        return timed
    finally:
        changes.close()
        client.close()


def _latency_process(
    address: str,
    credentials_dir: Path | None,
    run: int,
    rounds: int,
    out: multiprocessing.queues.Queue[list[Timed]],
) -> None:
    out.put(latency_run(address, credentials_dir, run, rounds))


def in_a_process(address: str, credentials_dir: Path | None, run: int, rounds: int) -> list[Timed]:
    """`latency_run` in a fresh process (spawned: nothing of the stack's state in it)."""
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.queues.Queue[list[Timed]] = context.Queue()
    process = context.Process(
        target=_latency_process, args=(address, credentials_dir, run, rounds, out)
    )
    process.start()
    timed = out.get(timeout=600)
    process.join()
    return timed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--latency-only", action="store_true", help="the latency case alone")
    parser.add_argument("--rounds", type=int, default=None, help="jobs per latency run")
    parser.add_argument("--runs", type=int, default=3, help="latency runs")
    parser.add_argument("--client", choices=("process", "thread"), default="process")
    args = parser.parse_args()
    rounds = args.rounds or (10 if args.quick else 30)
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

            hops = Hops(stack)
            medians: list[float] = []
            callbacks: list[float] = []
            for run in range(args.runs):
                with LoopCallbacks(stack) as counted:  # the warm-up job counts too
                    if args.client == "process":
                        timed = in_a_process(stack.address, stack.credentials_dir, run, rounds)
                    else:
                        timed = latency_run(stack.address, stack.credentials_dir, run, rounds)
                callbacks.append(counted.count / (rounds + 1))
                for t in timed:
                    hops.call(t.name, t.call)
                    hops.submitted(t.name, t.job_id, t.returned)
                    hops.saw_running(t.job_id, t.running)
                latencies = [t.latency for t in timed]
                medians.append(statistics.median(latencies) * 1e3)
                print(
                    f"submit->RUNNING on an idle stack, run {run + 1}:"
                    f" min {min(latencies) * 1e3:.1f} ms  p50 {medians[-1]:.1f} ms"
                    f"  p90 {pct(latencies, 0.9) * 1e3:.1f} ms  max {max(latencies) * 1e3:.1f} ms"
                    f"  (n={rounds}, client in a {args.client})"
                )
            print(
                f"submit->RUNNING p50 over {args.runs} runs: min {min(medians):.1f}"
                f"  median {statistics.median(medians):.1f}  max {max(medians):.1f} ms"
            )
            print(
                f"stack loop callbacks per job (submit to SUCCEEDED, retire): min"
                f" {min(callbacks):.0f}  median {statistics.median(callbacks):.0f}"
                f"  max {max(callbacks):.0f}"
            )
            hops.print()
            if args.latency_only:
                c.close()
                return

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
