"""Short jobs end to end: N x `true` on 4 hosts through the real stack (process runtime).

Each run submits N jobs in bulk calls to a queue whose 4 hosts (one unit each)
run them, and times the first submit to the last SUCCEEDED seen by a watch.
Prints jobs/s min/median/max over the runs and the CPU per supervised attempt
(CPU of the processes the agents started: the job's wrapper and the job, here
`true`), and this process's own CPU per job (the whole stack runs in it).
Asserts nothing.

The timed client (bulk submits and the watch) runs in a process of its own by
default, as a user's would, so it takes no GIL from the stack's loop; its CPU
is left out of both figures. `--client thread` runs it in the stack's process
(how this bench measured before).

The watch streams only the jobs' ends (`statuses`), as a client waiting for them
would; `--watch all` streams every change (how this bench measured before).

`--folds shared,separate` compares `qm up`'s default (one fold of the log for
the whole stack, projection transactions gathered under load) with the path
before it (one fold per service, a transaction per message run), alternating
a fresh stack of each kind per run, so both see the same machine load. `--profile N` profiles the
stack's loop (cProfile) during the runs and prints the N functions with the
most own time, as shares of the loop's profiled time.

    python bench/short_jobs_bench.py [--jobs 1000] [--runs 3] [--folds shared]
        [--profile 25] [--client process|thread]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import multiprocessing
import os
import pstats
import statistics
import tempfile
import threading
import time
from pathlib import Path
from queue import Queue

import psutil

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client import Quartermaster, TrainingQueue, training_job
from quartermaster.client.connection import QuartermasterError
from quartermaster_stack.node_process import NodeProcess
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.stack import Stack
from quartermaster_stack.thread import StackThread

UNIT = "ml.g5.xlarge"
HOSTS = 4
BULK = 250


WATCHED = {"ends": ("SUCCEEDED", "FAILED"), "all": ()}  # --watch: the statuses streamed


def run_once(
    client: Quartermaster, queue: TrainingQueue, run: int, jobs: int, watch_ends: bool = True
) -> float:
    """Seconds from the first submit until every job of this run SUCCEEDED."""
    changes: Queue[tuple[str, int]] = Queue()
    statuses = WATCHED["ends" if watch_ends else "all"]

    def watch() -> None:  # changes from the moment it subscribes: start it first
        with contextlib.suppress(QuartermasterError):  # the channel closes at the end
            only = {"statuses": statuses} if statuses else {}  # older clients: no filter
            for change in client.watch(job_queue=queue.name, timeout=1800, **only):
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


def timed_client(
    address: str, credentials_dir: Path | None, run: int, jobs: int, watch_ends: bool
) -> float:
    """`run_once` with a client of its own (in the process that calls it)."""
    client = Quartermaster(address, credentials_dir=credentials_dir)
    try:
        return run_once(client, TrainingQueue("q", client), run, jobs, watch_ends)
    finally:
        client.close()


def _client_process(
    address: str,
    credentials_dir: Path | None,
    run: int,
    jobs: int,
    watch_ends: bool,
    out: multiprocessing.queues.Queue[tuple[float, float]],
) -> None:
    seconds = timed_client(address, credentials_dir, run, jobs, watch_ends)
    out.put((seconds, own_cpu()))  # this process's CPU: left out of the figures


def in_a_process(
    address: str, credentials_dir: Path | None, run: int, jobs: int, watch_ends: bool
) -> float:
    """`timed_client` in a fresh process; returns its seconds. Its CPU, which the
    parent counts with its children's once it is reaped, is taken off that count."""
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.queues.Queue[tuple[float, float]] = context.Queue()
    process = context.Process(
        target=_client_process, args=(address, credentials_dir, run, jobs, watch_ends, out)
    )
    process.start()
    seconds, cpu = out.get(timeout=1800)
    process.join()
    _client_cpu.append(cpu)
    return seconds


_client_cpu: list[float] = []  # CPU of each finished client process


def children_cpu() -> float:
    """CPU of reaped children (the jobs' wrappers and jobs), client processes left out."""
    times = os.times()
    return times.children_user + times.children_system - sum(_client_cpu)


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


class Figures:
    def __init__(self) -> None:
        self.rates: list[float] = []
        self.child_ms: list[float] = []
        self.own_ms: list[float] = []
        self.agents_ms: list[float] = []  # node-agent processes (0 for agents in the stack)
        self.passes: list[float] = []  # scheduler passes per job
        self.transactions: list[float] = []  # projection transactions per job


async def _profiling(profile: cProfile.Profile, on: bool) -> None:
    """Run in the stack's loop thread: cProfile sees only the thread that enables it."""
    if on:
        profile.enable()
    else:
        profile.disable()


def one_stack(
    kind: Kind,
    run: int,
    jobs: int,
    figures: Figures,
    profile: cProfile.Profile | None,
    client_process: bool,
    watch_ends: bool = True,
) -> None:
    """A fresh stack (one fold or one per service, agents in it or in processes of their
    own), a warm-up, then one timed run."""
    shared, agent_processes = kind
    with tempfile.TemporaryDirectory() as tmp:
        settings = StackSettings(
            data_dir=Path(tmp),
            nodes=HOSTS,
            grpc_port=0,
            gpus_per_node=0,
            stop_grace_seconds=5,
            shared_fold=shared,
            node_processes=agent_processes,
            projection_interval_seconds=0.02 if shared else 0.0,
        )
        with StackThread(settings) as stack:
            client = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
            client.create_service_environment("env", {UNIT: HOSTS})
            client.create_scheduling_policy("fifo")
            client.create_job_queue("q", "env", "fifo")
            client.create_quota_share("q", "A", {UNIT: HOSTS}, "LEND_AND_BORROW")
            queue = TrainingQueue("q", client)
            # Warm-up (hosts registered, paths hot) on a client of its own, closed after it:
            # its watch ends with it (one left open doubled the stack's watch messages).
            warm_up = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
            run_once(warm_up, TrainingQueue("q", warm_up), -1, HOSTS * 2, watch_ends)
            warm_up.close()
            child0, own0, agents0 = children_cpu(), own_cpu(), agents_cpu(stack.stack)
            scheduler, projector = stack.stack.parts["scheduler"], stack.stack.parts["projector"]
            passes0, transactions0 = scheduler.passes, projector.transactions
            if profile is not None:
                stack.run(_profiling(profile, True))
            if client_process:
                seconds = in_a_process(stack.address, stack.credentials_dir, run, jobs, watch_ends)
            else:
                seconds = run_once(client, queue, run, jobs, watch_ends)
            if profile is not None:
                stack.run(_profiling(profile, False))
            figures.rates.append(jobs / seconds)
            agents1 = agents_cpu(stack.stack)
            supervised = children_cpu() - child0 + agents1[1] - agents0[1]
            figures.child_ms.append(supervised / jobs * 1e3)
            figures.own_ms.append((own_cpu() - own0) / jobs * 1e3)
            figures.agents_ms.append((agents1[0] - agents0[0]) / jobs * 1e3)
            figures.passes.append((scheduler.passes - passes0) / jobs)
            figures.transactions.append((projector.transactions - transactions0) / jobs)
            print(
                f"run {run} ({kind_name(kind)}): {jobs} jobs in {seconds:.1f} s"
                f" = {figures.rates[-1]:.1f} jobs/s;"
                f" CPU per supervised attempt {figures.child_ms[-1]:.1f} ms;"
                f" stack CPU per job {figures.own_ms[-1]:.1f} ms"
                f" (+ agent processes {figures.agents_ms[-1]:.1f} ms);"
                f" per job: {figures.passes[-1]:.2f} passes,"
                f" {figures.transactions[-1]:.2f} projection transactions",
                flush=True,
            )
            client.close()


Kind = tuple[bool, bool]  # (one shared fold, node agents in processes of their own)


def kind_name(kind: Kind) -> str:
    shared, agent_processes = kind
    fold = "shared" if shared else "separate"
    return f"{fold} fold, agents {'in processes' if agent_processes else 'in the stack'}"


def agents_cpu(stack: Stack) -> tuple[float, float]:
    """CPU of the node-agent processes (`--agents processes`), and of the children they
    reaped (the jobs' wrappers and jobs); (0, 0) for agents in the stack's process."""
    own = children = 0.0
    for part in stack.parts.values():
        if isinstance(part, NodeProcess):
            times = psutil.Process(part.process.pid).cpu_times()
            own += times.user + times.system
            children += times.children_user + times.children_system
    return own, children


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--folds", default="shared", help="shared, separate or both, in order")
    parser.add_argument(
        "--agents",
        default="stack",
        help="node agents in the stack's process, in processes of their own, or both"
        " (stack,processes: alternated)",
    )
    parser.add_argument("--profile", type=int, default=0, help="print the top N of the loop")
    parser.add_argument("--client", choices=("process", "thread"), default="process")
    parser.add_argument(
        "--watch",
        choices=tuple(WATCHED),
        default="ends",
        help="the client's watch streams only ends (SUCCEEDED, FAILED) or every change",
    )
    args = parser.parse_args()
    kinds = [
        (fold.strip() == "shared", agents.strip() == "processes")
        for fold in args.folds.split(",")
        for agents in args.agents.split(",")
    ]
    figures = {kind: Figures() for kind in kinds}
    profiles = {kind: cProfile.Profile() for kind in kinds} if args.profile else {}
    for run in range(args.runs):
        for kind in kinds:
            one_stack(
                kind,
                run,
                args.jobs,
                figures[kind],
                profiles.get(kind),
                args.client == "process",
                args.watch == "ends",
            )
    for kind in kinds:
        f = figures[kind]
        print(
            f"{args.jobs} x `true` on {HOSTS} hosts, {args.runs} runs,"
            f" {kind_name(kind)}, client in a {args.client}, watching {args.watch}:"
        )
        print(f"  jobs/s                       {summary(f.rates, '.1f')}")
        print(f"  CPU per supervised attempt   {summary(f.child_ms, '.1f')} ms")
        print(f"  stack CPU per job (in-proc)  {summary(f.own_ms, '.1f')} ms")
        print(f"  agent processes CPU per job  {summary(f.agents_ms, '.1f')} ms")
        print(f"  scheduler passes per job     {summary(f.passes, '.2f')}")
        print(f"  projection transactions/job  {summary(f.transactions, '.2f')}")
    for kind, profile in profiles.items():
        print(f"stack loop profile, {kind_name(kind)} (own time, share of the total):")
        print(top_functions(profile, args.profile))


def top_functions(profile: cProfile.Profile, count: int) -> str:
    stats = pstats.Stats(profile, stream=io.StringIO())
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(own for _, _, own, _, _ in entries.values()) or 1.0
    ranked = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:count]
    lines = []
    for (path, line, name), (_, calls, own, cumulative, _) in ranked:
        where = f"{'/'.join(path.split('/')[-2:])}:{line}({name})"
        lines.append(
            f"  {100 * own / total:5.1f}%  own {own:6.2f} s  cum {cumulative:6.2f} s"
            f"  calls {calls:>8}  {where}"
        )
    return "\n".join(lines)


def summary(values: list[float], fmt: str) -> str:
    return (
        f"min {min(values):{fmt}}  median {statistics.median(values):{fmt}}"
        f"  max {max(values):{fmt}}"
    )


if __name__ == "__main__":
    main()
