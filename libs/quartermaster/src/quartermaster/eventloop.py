"""The event loop of Quartermaster's long-running processes: uvloop's where it is installed.

A service spends much of its CPU in the loop's own work for each message (socket reads
and writes, TLS records, callbacks, timers, threads handing results back): on a busy
host that is most of a node agent's cost per job. uvloop does that work in C (libuv).
deployed_bench (3 replicas, secured, 2 runs each, the services only): 113-124 jobs/s and
15.4-16.8 CPU-s per 1000 jobs on uvloop, against 96.5-107 and 17.8-19.8 on asyncio's
loop; each agent 2.2 CPU-s per 1000 jobs against 2.5-2.6.

The services (`eventlog.process.run`) and `qm up` (its process and the thread its tests
and benchmarks run it in) run on it. Where uvloop is not installed, asyncio's own loop
runs the same code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop maker; None (asyncio's default) where uvloop is not installed."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`, on the loop above."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(coro)
