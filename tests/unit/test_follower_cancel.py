"""A wait on the fold, cancelled as the fold reaches it, stays cancelled.

Python 3.11's `asyncio.wait_for` returns normally when the cancellation comes as
what it waits for completes: a service's loop, cancelled at that moment, went on
(`asyncio.timeout` keeps the cancellation).
"""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from quartermaster.bus import JetStreamLog
from quartermaster.eventlog.follower import LogFollower


async def test_a_wait_cancelled_as_the_fold_reaches_it_is_cancelled() -> None:
    follower = LogFollower(cast(JetStreamLog, None))  # never started: no log is read
    waiting = asyncio.create_task(follower.wait_for(5, timeout=10))
    await asyncio.sleep(0.01)
    folded = follower._fold
    async with folded.advanced:
        folded.seq = 5
        folded.advanced.notify_all()
    waiting.cancel()  # in the same turn as the fold reaching it
    with pytest.raises(asyncio.CancelledError):
        await waiting
