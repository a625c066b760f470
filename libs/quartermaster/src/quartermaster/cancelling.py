"""Stopping a task for sure: cancel it again until it has ended.

One `cancel()` is not always enough on Python 3.11: `asyncio.wait_for` drops a
cancellation that arrives just as what it waits for completes (fixed in 3.12),
and libraries wait that way (nats-py's requests and object store among them). The
task then carries on, and whoever awaits it after one cancel waits forever: a
scheduler under test hung so at its next `await self._dirty.wait()` (stops 13,
16, 18 and 19 of issue #10).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

AGAIN_AFTER_SECONDS = 0.2


async def cancel_and_wait(
    task: asyncio.Future[Any], again_after: float = AGAIN_AFTER_SECONDS
) -> None:
    """Cancel `task` until it has ended (its own error, if any, is dropped: it was
    being stopped). Cancelling the caller still cancels the caller."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=again_after)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()
