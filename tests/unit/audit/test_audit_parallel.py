"""Verifying a file on several processes gives the sequential answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from logs import FIXTURES, decision_messages, edited

from quartermaster import events as ev
from quartermaster.audit import read_log, verify, write_log
from quartermaster.audit.parallel import verify_file

BUSY = FIXTURES / "busy-stack.jsonl"


@pytest.mark.parametrize("workers", [2, 3])
def test_a_good_log_verifies_the_same_in_parallel(workers: int) -> None:
    alone = verify(read_log(BUSY))
    together = verify_file(BUSY, workers=workers, min_messages_per_worker=50)
    assert together.ok and alone.ok
    fields = ("messages", "events", "decision_messages", "decisions", "raced", "ignored")
    assert [getattr(together, f) for f in fields] == [getattr(alone, f) for f in fields]
    assert together.passes >= together.decision_messages


def test_a_forged_log_gets_the_sequential_report(tmp_path: Path) -> None:
    log = list(read_log(BUSY))
    index = decision_messages(log)[-5]  # late in the log: in the last worker's stretch
    event = log[index].events[0]
    assert isinstance(event, ev.JobDispatched | ev.WarmPoolAvailable | ev.JobPreemptionRequested)
    forged = tmp_path / "forged.jsonl"
    write_log(forged, edited(log, index, 0, at=event.at + 1))
    together = verify_file(forged, workers=3, min_messages_per_worker=50)
    assert together.differences == verify(read_log(forged)).differences
    assert together.differences[0].seq == log[index].seq


def test_a_short_log_is_verified_in_one_process() -> None:
    report = verify_file(BUSY, workers=4)  # 351 messages: below a worker's minimum
    assert report.ok and report.messages == 351
