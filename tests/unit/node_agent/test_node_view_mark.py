"""`ViewMark`: the newest view position an agent dropped an attempt's record at."""

from __future__ import annotations

from pathlib import Path

import msgspec

from qm_node_agent.records import AttemptRecord
from qm_node_agent.viewmark import ViewMark


def test_a_mark_only_advances_and_is_read_back_by_the_next_agent(tmp_path: Path) -> None:
    path = tmp_path / "view.mark"
    mark = ViewMark(path)
    assert mark.seq == 0 and not path.exists()  # a fresh host: every view is new enough
    mark.advance(7)
    mark.advance(5)  # an older position changes nothing
    assert mark.seq == 7
    assert ViewMark(path).seq == 7  # what a restarted agent starts from


def test_an_unreadable_mark_counts_as_none(tmp_path: Path) -> None:
    path = tmp_path / "view.mark"
    path.write_text("not a number\n")
    assert ViewMark(path).seq == 0


def test_a_record_saved_before_the_field_existed_reads_as_launched_from_no_view() -> None:
    older = {"job_id": "j", "attempt": 1, "host": "h1", "runtime": "process"}
    older |= {"chain_id": "c", "launched_at": 1.0}
    record = msgspec.msgpack.decode(msgspec.msgpack.encode(older), type=AttemptRecord)
    assert record.view_seq == 0


def test_a_mark_is_rewritten_in_place_and_reads_back_after_an_older_layout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "view.mark"
    path.write_text("12\n")  # as written whole before (a line of its own length)
    mark = ViewMark(path)
    assert mark.seq == 12
    mark.advance(13)
    inode = path.stat().st_ino
    mark.advance(123456789)
    mark.advance(123456790)
    mark.close()
    assert path.stat().st_ino == inode  # no new file per advance (no inode made)
    assert path.read_text() == f"{123456790:020d}\n"
    assert ViewMark(path).seq == 123456790
