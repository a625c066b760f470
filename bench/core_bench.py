"""Micro-benchmark of the pure core: fold throughput, pass latency, drain rate.

Prints figures; asserts nothing. Run: python bench/core_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable

import fold_mix

from quartermaster import events as ev
from quartermaster.core import State, decide, fold
from quartermaster.core.incremental import PassMemo
from quartermaster.core.model import JobStatus
from quartermaster.eventlog.long_lived import freeze_long_lived
from quartermaster.testing import histories
from quartermaster.testing.histories import STRATEGIES, UNIT, realistic_log


def build(jobs: int, shares: int = 20, hosts: int = 1000) -> tuple[State, list[ev.Event]]:
    log = histories.config(shares, hosts)
    for j in range(jobs):
        log.append(
            ev.JobSubmitted(
                at=1 + j * 1e-4,
                job_id=f"j{j:07d}",
                job_name="bench",
                job_queue="q",
                quota_share=f"s{(j * 7) % shares:02d}",
                instance_type=UNIT,
                scheduling_priority=(j * 31) % 10,
            )
        )
    state = State()
    for e in log:
        fold(state, e)
    # Long-lived state moves out of the GC's way, as the scheduler does after a restore;
    # otherwise a full collection over 100k jobs lands inside whichever pass is timed.
    gc.collect()
    gc.freeze()
    return state, log


def apply(state: State, events: list[ev.Event]) -> None:
    for e in events:
        fold(state, e)


def finish(state: State, k: int, at: float) -> None:
    """k running jobs (lowest ids) report success: k hosts come free."""
    done = 0
    for job in state.jobs.values():
        if job.status is JobStatus.SCHEDULED and job.hosts:
            fold(
                state,
                ev.JobSucceeded(
                    at=at, job_id=job.job_id, attempt=job.attempt_no, host=job.hosts[0]
                ),
            )
            done += 1
            if done == k:
                return


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def bench_fold(jobs: int, runs: int = 3, against: str | None = None) -> None:
    """Fold throughput over a realistic log (`testing.histories`: what the real pass and node
    agents write for `jobs` jobs), in CPU events/s (the machine is shared: CPU time is
    the steadier figure), over `runs` folds: the decoded list in memory, and decoding
    each event from msgpack as a log reader does. With `against` (a git revision), that
    revision's library is measured too, one run each in turn, in child processes."""
    t = time.perf_counter()
    log = realistic_log(jobs)
    mix = Counter(type(e).__name__ for e in log)
    print(
        f"fold: {len(log):,} events of {jobs:,} jobs (written in {time.perf_counter() - t:.0f} s; "
        + ", ".join(f"{name} {count / len(log):.0%}" for name, count in mix.most_common(8))
        + f"), load average {os.getloadavg()[0]:.1f}"
    )
    encoded = [ev.encode(e) for e in log]
    del log
    if against is None:
        mine = fold_mix.measure(encoded, runs)
        before = None
    else:
        mine, before = fold_mix.compare(against, encoded, runs)
    for label, figures in (("this checkout", mine), (against, before)):
        if figures is None:
            continue
        print(f"  {label}, {runs} runs, events/s (CPU):")
        print(f"    in memory, event by event:    {fold_mix.spread(figures.in_memory)}")
        print(f"    in memory, replay (fold_all): {fold_mix.spread(figures.replay)}")
        print(f"    with decode, event by event:  {fold_mix.spread(figures.with_decode)}")
        print(f"    with decode, replay:          {fold_mix.spread(figures.replay_with_decode)}")
        print(f"    decode alone:                 {fold_mix.spread(figures.decode_only)}")
    if before is not None:
        for label, got, had in (
            ("event by event", mine.in_memory, before.in_memory),
            ("replay", mine.replay, before.replay),
        ):
            ratio = statistics.median(got) / statistics.median(had)
            print(f"  in memory, {label}, median against median: {ratio:.2f}x")


def bench_pass(n: int, rounds: int) -> None:
    state, _ = build(n + 1000)
    t = time.perf_counter()
    first = decide(state)
    t_first = time.perf_counter() - t
    apply(state, first)
    dispatched = sum(isinstance(d, ev.JobDispatched) for d in first)
    idle: list[float] = []
    busy: list[float] = []
    at = 10.0
    for _ in range(rounds):
        t = time.perf_counter()
        decisions = decide(state)  # steady state: every host busy
        idle.append(time.perf_counter() - t)
        apply(state, decisions)
        at += 1
        finish(state, 10, at)
        while True:  # settle completions (housekeeping), then time the dispatching pass
            t = time.perf_counter()
            decisions = decide(state)
            elapsed = time.perf_counter() - t
            if not decisions:
                break
            apply(state, decisions)
            if any(isinstance(d, ev.JobDispatched) for d in decisions):
                busy.append(elapsed)
    ms = 1e3
    print(
        f"pass, {n:>7,} RUNNABLE / 20 shares / 1000 hosts: first pass {t_first * ms:7.1f} ms "
        f"({dispatched} dispatches, {t_first / max(dispatched, 1) * 1e6:5.1f} us each); "
        f"full p50 {statistics.median(idle) * ms:5.2f} ms p99 {pct(idle, 0.99) * ms:5.2f} ms"
        + (
            f"; 10 freed p50 {statistics.median(busy) * ms:5.2f} ms"
            f" p99 {pct(busy, 0.99) * ms:5.2f} ms"
            if busy
            else "; queue empty after the first pass"
        )
    )


def bench_drain(n: int) -> None:
    state, _ = build(n + 1000)
    decisions_total = 0
    at = 10.0
    t = time.perf_counter()
    while True:
        decisions = decide(state)
        if not decisions:
            running = [j for j in state.jobs.values() if j.status is JobStatus.SCHEDULED][:1000]
            if not running:
                break
            at += 1
            for job in running:
                fold(
                    state,
                    ev.JobSucceeded(
                        at=at, job_id=job.job_id, attempt=job.attempt_no, host=job.hosts[0]
                    ),
                )
            continue
        decisions_total += len(decisions)
        apply(state, decisions)
    dt = time.perf_counter() - t
    print(
        f"drain {n:,} jobs through 1000 hosts: {decisions_total:,} decisions in {dt:.2f} s "
        f"= {decisions_total / dt:,.0f} decisions/s (completions folded in the loop)"
    )


def build_platform(queues: int, shares: int, hosts: int, jobs: int) -> State:
    """`queues` queues of `shares` shares on one environment of `hosts` hosts, every host
    busy after the first pass and the rest of `jobs` RUNNABLE (folded as they are made:
    no log is kept)."""
    state = State()
    own = max(1, hosts // (queues * shares))
    fold(
        state,
        ev.ServiceEnvironmentCreated(
            at=0, name="env", capacity_limits=(ev.CapacityLimit(UNIT, hosts),)
        ),
    )
    fold(state, ev.SchedulingPolicyCreated(at=0, name="fifo"))
    for q in range(queues):
        fold(
            state,
            ev.JobQueueCreated(
                at=0, name=f"q{q:03d}", service_environment="env", scheduling_policy="fifo"
            ),
        )
        for s in range(shares):
            fold(
                state,
                ev.QuotaShareCreated(
                    at=0,
                    job_queue=f"q{q:03d}",
                    name=f"s{s:02d}",
                    capacity_limits=(ev.CapacityLimit(UNIT, own),),
                    strategy=ev.SharingStrategy(STRATEGIES[s % 4]),
                    borrow_limit=100,
                    in_share_preemption=ev.State.ENABLED,
                ),
            )
    for i in range(hosts):
        fold(state, ev.HostRegistered(at=0, host_id=f"h{i:05d}", instance_type=UNIT))
    for j in range(jobs):
        fold(
            state,
            ev.JobSubmitted(
                at=1 + j * 1e-6,
                job_id=f"j{j:07d}",
                job_name="bench",
                job_queue=f"q{j % queues:03d}",
                quota_share=f"s{(j // queues * 7) % shares:02d}",
                instance_type=UNIT,
                scheduling_priority=(j * 31) % 10,
            ),
        )
    while decisions := decide(state):
        apply(state, decisions)
    freeze_long_lived()  # what the scheduler does once it has caught up
    return state


def summary(values: list[float]) -> str:
    ms = [v * 1e3 for v in values]
    return (
        f"min {min(ms):6.2f} median {statistics.median(ms):6.2f} "
        f"p99 {pct(ms, 0.99):6.2f} max {max(ms):6.2f} ms"
    )


class PassClock:
    """Wall and CPU time of each timed pass, and the cyclic GC's collections inside them."""

    active: PassClock | None = None  # the clock of the pass running now, if any

    def __init__(self, name: str) -> None:
        self.name = name
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.collections: Counter[int] = Counter()  # generation -> collections
        self.gc_seconds = 0.0
        self._gc_started = 0.0

    def time(self, run: Callable[[], list[ev.Event]]) -> list[ev.Event]:
        PassClock.active = self
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return run()
        finally:
            self.cpu.append(time.thread_time() - cpu)
            self.wall.append(time.perf_counter() - wall)
            PassClock.active = None

    @staticmethod
    def on_gc(phase: str, info: dict[str, int]) -> None:
        clock = PassClock.active
        if clock is None:
            return
        if phase == "start":
            clock._gc_started = time.perf_counter()
            return
        clock.collections[info["generation"]] += 1
        clock.gc_seconds += time.perf_counter() - clock._gc_started

    def report(self) -> None:
        gens = ", ".join(f"gen{g} {n}" for g, n in sorted(self.collections.items())) or "none"
        print(f"  {self.name} ({len(self.wall)} passes)")
        print(f"    wall: {summary(self.wall)}")
        print(f"    CPU:  {summary(self.cpu)}")
        print(f"    GC collections inside these passes: {gens} ({self.gc_seconds * 1e3:.1f} ms)")


def bench_incremental(
    queues: int, shares: int, hosts: int, jobs: int, rounds: int, check_every: int = 10
) -> None:
    """A pass over everything against one that re-decides only what changed, in one run:
    a submit to one queue (nothing else changed), and a job of one queue finishing (a
    host comes free: every queue may take it, and the first that may does). Every
    `check_every`-th round the full pass is timed too, and both incremental passes are
    compared with it (the same decisions, or the run stops)."""
    t = time.perf_counter()
    state = build_platform(queues, shares, hosts, jobs)
    runnable = sum(len(v) for v in state.runnable.values())
    busy = sum(1 for h in state.hosts.values() if h.holder is not None)
    print(
        f"platform: {queues} queues x {shares} shares, {busy:,}/{hosts:,} hosts busy, "
        f"{runnable:,} RUNNABLE (built in {time.perf_counter() - t:.0f} s; "
        f"load average {os.getloadavg()[0]:.1f})"
    )
    memo = PassMemo()
    assert decide(state, memo=memo) == []  # warm the memo: every unit pass once
    full = PassClock("full pass, nothing changed (every check round)")
    submit = PassClock("incremental, one queue's submit")
    finished = PassClock("incremental, one job finished (a host comes free)")
    warm = PassClock("warm-up rounds (the memo's first freed host), not counted above")
    housekeeping = PassClock("housekeeping passes before a placing one (none expected)")
    gc.callbacks.append(PassClock.on_gc)
    at = 100.0
    running = iter([j for j in state.jobs.values() if j.hosts])
    warmup = 3
    try:
        for r in range(-warmup, rounds):
            at += 1
            check = r >= 0 and r % check_every == 0
            if check:
                assert full.time(lambda: decide(state)) == []
            queue = f"q{(r * 37) % queues:03d}"
            fold(
                state,
                ev.JobSubmitted(
                    at=at,
                    job_id=f"x{r + warmup:06d}",
                    job_name="bench",
                    job_queue=queue,
                    quota_share="s00",
                    instance_type=UNIT,
                ),
            )
            clock = submit if r >= 0 else warm
            decisions = clock.time(lambda: decide(state, memo=memo))
            if check:
                assert decisions == decide(state), "incremental pass differs from the full pass"
            apply(state, decisions)
            job = next(running)
            fold(
                state,
                ev.JobSucceeded(
                    at=at, job_id=job.job_id, attempt=job.attempt_no, host=job.hosts[0]
                ),
            )
            clock = finished if r >= 0 else warm
            while True:  # settle the completion (housekeeping), then time the pass that places
                settling = bool(state.awaiting_outcome or state.retained)
                timer = housekeeping if settling else clock
                decisions = timer.time(lambda: decide(state, memo=memo))
                if check:
                    assert decisions == decide(state), "incremental pass differs from full"
                apply(state, decisions)
                if not settling:
                    break
    finally:
        gc.callbacks.remove(PassClock.on_gc)
    print(
        f"  {rounds} rounds (+{warmup} warm-up), full pass timed and compared every "
        f"{check_every}th; load average now {os.getloadavg()[0]:.1f}"
    )
    for clock in (full, submit, finished, warm, housekeeping):
        if clock.wall:
            clock.report()
    print(f"  unit passes run {memo.run:,}, skipped {memo.skipped:,}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["fold", "pass", "incremental", "drain"])
    parser.add_argument("--rounds", type=int, default=1000, help="incremental case rounds")
    parser.add_argument("--fold-jobs", type=int, default=30_000, help="fold case: jobs in the log")
    parser.add_argument("--runs", type=int, default=3, help="fold case: runs")
    parser.add_argument("--against", help="fold case: also measure this git revision, in turn")
    args = parser.parse_args()
    if args.only == "fold":
        bench_fold(args.fold_jobs, args.runs, args.against)
        return
    if args.only == "incremental" or args.only is None:
        if args.quick:
            bench_incremental(100, 20, 2_000, 100_000, rounds=200)
        else:
            bench_incremental(100, 20, 10_000, 1_000_000, rounds=args.rounds)
        if args.only:
            return
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    bench_fold(5_000 if args.quick else args.fold_jobs, args.runs, args.against)
    for n in sizes:
        bench_pass(n, rounds=20 if args.quick else 50)
    bench_drain(10_000 if args.quick else 50_000)


if __name__ == "__main__":
    main()
