"""Simulate a 100k-job trace against a candidate configuration; print the wall time.

Usage: python bench/simulate_bench.py [--jobs 100000] [--runs 1] [--seed 7]

The trace is generated here (seeded): four quota shares of 64 hosts, Poisson
arrivals at about 90 % offered load, log-normal durations (median 1 h), mostly
one instance per job with some gangs of 2, 4 and 8, priorities 0-5. The figure
is the wall time of the candidate simulation (the goal: under 60 s for 100k
jobs), then of the two references `qm simulate` also runs, then of all three
as `qm simulate` runs them (a process each).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import msgspec

from quartermaster.audit.gc_pause import paused_gc
from quartermaster.audit.simconfig import ShareConfig, SimConfig, TraceJob
from quartermaster.audit.simulate import compare, scenarios, simulate, trace_jobs
from quartermaster.events import SharingStrategy
from quartermaster.events import State as Toggle

UNIT = "ml.g5.xlarge"
HOSTS = 64
SHARES = (
    ("research", 24, SharingStrategy.LEND_AND_BORROW, 100, 0.40),
    ("product", 24, SharingStrategy.LEND, -1, 0.35),
    ("batch", 8, SharingStrategy.LEND_AND_BORROW, -1, 0.15),
    ("oncall", 8, SharingStrategy.RESERVE, -1, 0.10),
)
COUNTS = (1, 1, 1, 1, 1, 1, 2, 2, 4, 8)


def config() -> SimConfig:
    return SimConfig(
        capacity={UNIT: HOSTS},
        shares=[
            ShareConfig(
                name,
                {UNIT: limit},
                strategy,
                borrow,
                Toggle.ENABLED if name == "research" else Toggle.DISABLED,
            )
            for name, limit, strategy, borrow, _ in SHARES
        ],
        stop_seconds=120,
    )


def trace(n: int, seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    mean_units = statistics.fmean(COUNTS)
    mean_duration = 3600 * 1.65  # log-normal(median 1 h, sigma 1): mean e^(1/2) h
    rate = 0.9 * HOSTS / (mean_units * mean_duration)  # arrivals per second at 90 % load
    names = [s[0] for s in SHARES]
    weights = [s[4] for s in SHARES]
    t, jobs = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        jobs.append(
            TraceJob(
                arrival=round(t, 3),
                duration=round(3600 * rng.lognormvariate(0, 1), 3),
                share=rng.choices(names, weights)[0],
                priority=rng.randint(0, 5),
                instance_count=rng.choice(COUNTS),
                instance_type=UNIT,
                name=f"j{i}",
            )
        )
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--write", type=Path, default=None, help="also write DIR/trace.jsonl, DIR/candidate.json"
    )
    args = parser.parse_args()
    cfg = config()
    generated = trace(args.jobs, args.seed)
    if args.write is not None:
        args.write.mkdir(parents=True, exist_ok=True)
        lines = (msgspec.json.encode(job) + b"\n" for job in generated)
        (args.write / "trace.jsonl").write_bytes(b"".join(lines))
        (args.write / "candidate.json").write_bytes(msgspec.json.format(msgspec.json.encode(cfg)))
    jobs = trace_jobs(generated)
    for name, scenario_cfg, scenario_jobs in scenarios(cfg, jobs):
        seconds = []
        outcome = None
        for _ in range(args.runs):
            started = time.perf_counter()
            with paused_gc():  # as `qm simulate` runs it
                outcome = simulate(scenario_cfg, scenario_jobs, name, labels=cfg.shares)
            seconds.append(time.perf_counter() - started)
        assert outcome is not None
        print(
            f"{name:<13} {args.jobs} jobs: wall s min/median/max "
            f"{min(seconds):.1f}/{statistics.median(seconds):.1f}/{max(seconds):.1f}; "
            f"{outcome.passes} passes, simulated {outcome.horizon / 86400:.1f} days, "
            f"utilization {outcome.utilization:.1%}"
        )

    started = time.perf_counter()
    compare(cfg, jobs, workers=3)
    print(
        f"qm simulate (the three scenarios, a process each): {time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
