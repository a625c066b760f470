"""Measuring the fold: CPU events/s over a log, here or in a child process running
another revision's library (so a shared machine's load hits both alike).

The log is `quartermaster.testing.histories.realistic_log`; a child reads it from a
file, so it needs nothing of this checkout but this script.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import msgspec

from quartermaster import events as ev
from quartermaster.core import State, fold
from quartermaster.core.fold import fold_all

try:
    from quartermaster.core.replay import replaying
except ImportError:  # a revision before replays: its fold keeps the indexes throughout
    replaying = contextlib.nullcontext  # type: ignore[assignment]

# ---- measuring ------------------------------------------------------------------------


class Figures(NamedTuple):
    """Events per second (CPU time) of each run."""

    in_memory: list[float]  # folding the decoded list, event by event (a live follower)
    with_decode: list[float]  # decoding each event from msgpack, then folding it
    decode_only: list[float]
    replay: list[float]  # the decoded list through `fold_all` (`core.replay`)
    replay_with_decode: list[float]  # decoding and folding each inside `replaying`


def measure(encoded: list[bytes], runs: int) -> Figures:
    """Fold the log `runs` times into a new State, each time ready to decide (the
    indexes' pending changes applied: `State.settle_indexes`, where there is one)."""
    log = [ev.decode(b) for b in encoded]
    gc.collect()
    gc.freeze()  # the log itself is long-lived: no collection walks it
    figures = Figures([], [], [], [], [])
    for _ in range(runs):
        for how, into in (
            ("fold", figures.in_memory),
            ("decode", figures.with_decode),
            ("fold_all", figures.replay),
            ("replay_decode", figures.replay_with_decode),
        ):
            state = State()
            gc.collect()
            started = time.process_time()
            if how == "decode":
                for data in encoded:
                    fold(state, ev.decode(data))
            elif how == "fold_all":
                fold_all(state, log)
            elif how == "replay_decode":
                with replaying(state):
                    for data in encoded:
                        fold(state, ev.decode(data))
            else:
                for event in log:
                    fold(state, event)
            getattr(state, "settle_indexes", lambda: None)()
            into.append(len(log) / (time.process_time() - started))
        started = time.process_time()
        for data in encoded:
            ev.decode(data)
        figures.decode_only.append(len(log) / (time.process_time() - started))
    gc.unfreeze()
    return figures


def spread(values: list[float]) -> str:
    return (
        f"min {min(values):>9,.0f} median {statistics.median(values):>9,.0f} "
        f"max {max(values):>9,.0f}"
    )


def measure_elsewhere(src: Path, log_file: Path) -> Figures:
    """One run of `measure` in a child process whose `quartermaster` is the one in `src`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, __file__, str(log_file)], env=env, check=True, capture_output=True
    ).stdout
    return msgspec.json.decode(out, type=Figures)


def library_at(revision: str, into: Path) -> Path:
    """The `quartermaster` library as of a git revision, extracted under `into`."""
    repo = Path(__file__).resolve().parent.parent
    tree = "libs/quartermaster/src"
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", revision, tree], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / tree


def compare(revision: str, encoded: list[bytes], runs: int) -> tuple[Figures, Figures]:
    """This checkout and `revision`, one run each in turn (a shared machine's load
    hits both alike), each in a child process of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        log_file = Path(tmp) / "log.msgpack"
        log_file.write_bytes(msgspec.msgpack.encode(encoded))
        theirs = library_at(revision, Path(tmp))
        ours = Path(__file__).resolve().parent.parent / "libs/quartermaster/src"
        mine, before = Figures([], [], [], [], []), Figures([], [], [], [], [])
        for _ in range(runs):
            for src, into in ((theirs, before), (ours, mine)):
                got = measure_elsewhere(src, log_file)
                for have, new in zip(into, got, strict=True):
                    have.extend(new)
    return mine, before


if __name__ == "__main__":  # a child of `measure_elsewhere`
    sys.stdout.buffer.write(
        msgspec.json.encode(measure(msgspec.msgpack.decode(Path(sys.argv[1]).read_bytes()), 1))
    )
