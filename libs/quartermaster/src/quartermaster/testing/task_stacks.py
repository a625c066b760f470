"""Where every pending asyncio task waits: the report of a test that hangs.

tests/conftest.py prints it shortly before pytest-timeout's limit, whose own dump
shows only threads (a hung loop idles in `select`, saying nothing of its tasks).
"""

from __future__ import annotations

import asyncio
import linecache
import sys
from typing import TextIO


def report_tasks(test: str, file: TextIO | None = None) -> int:
    """Print the await chain of every pending asyncio task, of any loop; returns how many.

    Called from a timer thread while the test's loop idles: the coroutines are
    suspended, so their frames hold still while they are read. `Task.print_stack`
    shows only a suspended task's outermost frame; this follows each `await` down
    to what the task waits on (a future, a sleep, a lock)."""
    out = file if file is not None else sys.stderr
    # Every task of every loop (C tasks included) registers in this one WeakSet.
    tasks = [t for t in list(asyncio.tasks._all_tasks) if not t.done()]  # type: ignore[attr-defined]
    print(f"\n==== {test}: still running; {len(tasks)} asyncio tasks pending ====", file=out)
    for task in tasks:
        print(f"---- {task.get_name()}", file=out)
        try:
            for line in await_chain(task.get_coro()):
                print(f"  {line}", file=out)
        except Exception as err:  # a frame that moved under us: the rest still print
            print(f"  (chain unreadable: {err!r})", file=out)
    return len(tasks)


def await_chain(awaitable: object, depth: int = 60) -> list[str]:
    """`file:line in function: source` of each suspended frame, outermost first, then
    what the innermost one awaits."""
    lines: list[str] = []
    current = awaitable
    for _ in range(depth):
        frame = getattr(current, "cr_frame", None) or getattr(current, "ag_frame", None)
        if frame is None:
            frame = getattr(current, "gi_frame", None)
        if frame is None:
            break
        code = frame.f_code
        source = linecache.getline(code.co_filename, frame.f_lineno).strip()
        lines.append(f"{code.co_filename}:{frame.f_lineno} in {code.co_name}: {source}")
        current = (
            getattr(current, "cr_await", None)
            or getattr(current, "ag_await", None)
            or getattr(current, "gi_yieldfrom", None)
        )
        if current is None:
            return lines
    lines.append(f"awaits {current!r}"[:300])
    return lines
