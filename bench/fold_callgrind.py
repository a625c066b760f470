"""The fold's cost in instructions an event, counted by valgrind's callgrind: a figure
that does not move with the load of a shared machine (timings move by 25 %).

    python bench/fold_callgrind.py [--jobs 30000] [--events 60000] [--against REV]

Folds the first `--events` events of `quartermaster.testing.histories.realistic_log`
(`--jobs` jobs) through `fold`, through `fold_all`, and only decodes them; each in a
child under callgrind counting only inside `functools.reduce` (the child calls the
fold through it), so writing and loading the log are not counted. With `--against`,
that revision's library is counted in turn. Needs `valgrind` (Debian: valgrind).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec

from quartermaster import events as ev

MODES = ("fold", "fold_all", "decode")
HERE = Path(__file__).resolve().parent.parent / "libs/quartermaster/src"


def child(log_file: str, mode: str, events: int) -> None:
    """What runs under callgrind: everything but the `reduce` call goes uncounted."""
    import functools
    import gc

    from quartermaster.core import State, fold
    from quartermaster.core.fold import fold_all

    encoded = msgspec.msgpack.decode(Path(log_file).read_bytes())[:events]
    log = [ev.decode(data) for data in encoded]
    gc.collect()
    gc.freeze()
    if mode == "fold":
        functools.reduce(fold, log, State())
    elif mode == "fold_all":
        functools.reduce(fold_all, [log], State())
    else:
        decode = ev.decode
        functools.reduce(lambda _, data: decode(data), encoded, None)


def counted(src: Path, log_file: Path, mode: str, events: int) -> int:
    """Instructions callgrind counted inside `reduce` for one mode."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = ["valgrind", "--tool=callgrind", "--toggle-collect=functools_reduce"]
    command += ["--callgrind-out-file=/dev/null", sys.executable, __file__]
    command += ["--child", str(log_file), mode, str(events)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no callgrind total in: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--events", type=int, default=60_000)
    parser.add_argument("--against", help="also count this git revision's library")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        log_file, mode, events = args.child
        child(log_file, mode, int(events))
        return
    import fold_mix  # the parent's only: a child may run an older library

    from quartermaster.testing.histories import realistic_log

    if shutil.which("valgrind") is None:
        sys.exit("fold_callgrind: valgrind is not installed (apt-get install valgrind)")
    log = realistic_log(args.jobs)
    events = min(args.events, len(log))
    print(f"fold_callgrind: the first {events:,} of {len(log):,} events ({args.jobs:,} jobs)")
    with tempfile.TemporaryDirectory() as tmp:
        log_file = Path(tmp) / "log.msgpack"
        log_file.write_bytes(msgspec.msgpack.encode([ev.encode(e) for e in log]))
        sources = [("this checkout", HERE)]
        if args.against:
            sources.append((args.against, fold_mix.library_at(args.against, Path(tmp))))
        for label, src in sources:
            figures = {mode: counted(src, log_file, mode, events) / events for mode in MODES}
            print(
                f"  {label}: instructions an event: fold {figures['fold']:,.0f}, "
                f"fold_all {figures['fold_all']:,.0f}, decode alone {figures['decode']:,.0f}"
            )


if __name__ == "__main__":
    main()
