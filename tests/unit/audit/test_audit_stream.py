"""Range reads of the log resume where a read that ended early stopped."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from quartermaster.audit.stream import read_through
from quartermaster.bus import LogEntry
from quartermaster.bus.errors import TransientBusError


class CutShort:
    """A log of `last` messages whose reads end after `per_read` of them (as under load)."""

    def __init__(self, last: int, per_read: int) -> None:
        self.last, self.per_read, self.reads = last, per_read, 0

    async def read(
        self, from_seq: int = 1, until_seq: int | None = None
    ) -> AsyncIterator[LogEntry]:
        self.reads += 1
        end = min(until_seq or self.last, from_seq + self.per_read - 1)
        for seq in range(from_seq, end + 1):
            yield LogEntry(seq, "qm.requests", b"", {})


async def test_a_read_cut_short_resumes_after_its_last_message() -> None:
    log = CutShort(last=10, per_read=3)
    seqs = [e.seq async for e in read_through(log, 1, 10)]  # type: ignore[arg-type]
    assert seqs == list(range(1, 11)) and log.reads == 4


async def test_a_read_that_gives_nothing_is_transient() -> None:
    log = CutShort(last=10, per_read=0)
    with pytest.raises(TransientBusError, match="stopped at seq 0 of 5"):
        _ = [e async for e in read_through(log, 1, 5)]  # type: ignore[arg-type]
