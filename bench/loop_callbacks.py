"""Counting the callbacks a stack's loop runs (asyncio handles: task steps, I/O and
timer callbacks): how many turns of the loop a call or a job takes. Unlike a time,
the machine's load does not move it. For benchmarks only: it wraps
`asyncio.events.Handle._run` while open.
"""

from __future__ import annotations

import asyncio
import threading

from quartermaster_stack.thread import StackThread


class LoopCallbacks:
    """Counts the callbacks (asyncio handles: task steps, I/O and timer callbacks) the
    stack's loop runs while this is open."""

    def __init__(self, stack: StackThread) -> None:
        # An older revision's StackThread (measured through PYTHONPATH) has no thread_id.
        self._thread = getattr(stack, "thread_id", None) or next(
            t.ident for t in threading.enumerate() if t.name == "qm-stack"
        )
        self.count = 0

    def __enter__(self) -> LoopCallbacks:
        self._run = original = asyncio.events.Handle._run
        thread, counter = self._thread, self

        def counted(handle: asyncio.events.Handle) -> None:
            if threading.get_ident() == thread:
                counter.count += 1
            original(handle)

        asyncio.events.Handle._run = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.events.Handle._run = self._run  # type: ignore[method-assign]
