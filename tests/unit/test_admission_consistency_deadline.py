"""Read-your-writes waits stop at the call's deadline (DeadlineReached), else at the read
timeout (ReadModelBehind); a position already reached is answered even at the deadline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from qm_admission.consistency import (
    DEADLINE_MARGIN_SECONDS,
    MIN_SEQ_KEY,
    MIN_WAIT_SECONDS,
    Consistency,
)
from qm_admission.errors import DeadlineReached, ReadModelBehind


class Position:
    """A projection (or follower) that stays at `seq`."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.state = object()
        self.waited: list[float | None] = []

    async def wait_for(self, seq: int, timeout: float | None = 10.0) -> None:
        self.waited.append(timeout)
        if seq > self.seq:
            await asyncio.sleep(timeout or 0)
            raise TimeoutError


class Context:
    def __init__(self, min_seq: int, remaining: float | None) -> None:
        self.min_seq = min_seq
        self.remaining = remaining

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((MIN_SEQ_KEY, str(self.min_seq)),)

    def time_remaining(self) -> float | None:
        return self.remaining


class Writer:
    last_seq = 0


def consistency(position: Position, timeout: float = 30.0) -> Consistency:
    return Consistency(Writer(), position, position, timeout)  # type: ignore[arg-type]


@pytest.mark.parametrize("read", ["projected", "folded"])
async def test_the_deadline_bounds_the_wait(read: str) -> None:
    position = Position(5)
    wait: Any = getattr(consistency(position), read)
    with pytest.raises(DeadlineReached, match="deadline"):
        await wait(Context(min_seq=9, remaining=0.25))
    # ends before the deadline: gRPC cancels the call at the deadline itself
    assert position.waited == [pytest.approx(0.25 - DEADLINE_MARGIN_SECONDS)]


async def test_a_deadline_nearer_than_the_margin_still_waits_a_little() -> None:
    position = Position(5)
    with pytest.raises(DeadlineReached):
        await consistency(position).projected(Context(min_seq=9, remaining=0.02))
    assert position.waited == [MIN_WAIT_SECONDS]


@pytest.mark.parametrize("read", ["projected", "folded"])
async def test_without_a_nearer_deadline_the_read_timeout_bounds_it(read: str) -> None:
    position = Position(5)
    wait: Any = getattr(consistency(position, timeout=0.05), read)
    for remaining in (None, 60.0):
        with pytest.raises(ReadModelBehind):
            await wait(Context(min_seq=9, remaining=remaining))
    assert position.waited == [0.05, 0.05]


async def test_a_reached_position_is_read_even_with_the_deadline_past() -> None:
    position = Position(9)
    await consistency(position).projected(Context(min_seq=9, remaining=-1.0))
    assert position.waited and position.waited[0] is not None and position.waited[0] > 0
