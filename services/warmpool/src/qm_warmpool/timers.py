"""When the next clock tick is due: pure, from the folded state and the wall clock.

Timers are never kept anywhere but the log: after a restart the folded state
names every pool's expiry and every attempt's deadline again.
"""

from __future__ import annotations

import math

from quartermaster.core import State


def next_due(state: State, now: float, tick_seconds: float) -> float:
    """The earliest of: a pool expiry, an attempt deadline, the next regular tick.

    Due times already folded (a tick at or after them exists) are skipped.
    Regular ticks sit on a grid, so every instance of the service computes the
    same instant and their ticks deduplicate on the log.
    """
    regular = math.floor(now / tick_seconds) * tick_seconds + tick_seconds
    due = regular
    for expires_at, _ in state.pool_expiries:
        if expires_at > state.now:
            due = min(due, expires_at)
            break
    for deadline, _ in state.deadlines:
        if deadline > state.now:
            due = min(due, deadline)
            break
    return due


def tick_id(due: float) -> str:
    return f"tick:{round(due * 1000)}"
