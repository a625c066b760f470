"""`qm usage` on a generated log: the series' rate and the picture's time (min/median/max).

Usage: python bench/usage_bench.py [--events 100000] [--runs 3] [--seed 3]

The log is `verify_bench.py`'s: the real core's history of a queue of four shares
(every strategy, borrowing, reclaims, in-share preemption) on 48 hosts, exported
as JSONL. Timed: reading the file and folding it into the series
(`quartermaster.audit.usage.usage_series`), then drawing the PNG (matplotlib, Agg).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from verify_bench import generate

from quartermaster.audit import read_log, write_log
from quartermaster.audit.usage import usage_series
from quartermaster.audit.usage_png import render_png


def figures(values: list[float], fmt: str) -> str:
    return "/".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    log = generate(args.events, args.seed, 1.0)
    events = sum(len(e.events) for e in log)
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "log.jsonl", Path(tmp) / "usage.png"
        write_log(path, log)
        rates, draws = [], []
        for _ in range(args.runs):
            began = time.perf_counter()
            series = usage_series(read_log(path))
            rates.append(events / (time.perf_counter() - began))
            began = time.perf_counter()
            render_png(series, out)
            draws.append(time.perf_counter() - began)
        print(
            f"{events} events, {len(log)} messages: {len(series.points)} points, "
            f"{len(series.preemptions)} preemptions"
        )
        print(f"series from the JSONL file: events/s min/median/max {figures(rates, ',.0f')}")
        print(f"PNG ({out.stat().st_size / 1e3:.0f} kB): s min/median/max {figures(draws, '.2f')}")


if __name__ == "__main__":
    main()
