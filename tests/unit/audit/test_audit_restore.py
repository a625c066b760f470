"""What a restore writes: every message at its own seq, payloads as stored, or nothing."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from logs import FIXTURES, seed_log

from quartermaster.audit import Envelope, Format, verify, write_log
from quartermaster.audit.envelope import from_message
from quartermaster.audit.errors import LogFileError
from quartermaster.audit.logfile import Stored, read_stored
from quartermaster.audit.restore import check, plan, refusal, state_digest
from quartermaster.eventlog import encode_batch


def restored(messages: list[Stored]) -> list[Envelope]:
    """What a reader of the restored stream gets back."""
    return [from_message(*message) for message in messages]


def stored(envelopes: list[Envelope]) -> list[Stored]:
    return [Stored(e.seq, e.subject, encode_batch(e.events)) for e in envelopes]


@pytest.mark.parametrize("fmt", list(Format))
def test_a_restored_log_reads_back_as_exported_and_still_verifies(
    tmp_path: Path, fmt: Format
) -> None:
    log = seed_log()
    path = tmp_path / f"log.{fmt.value}"
    write_log(path, log, fmt)
    messages = list(plan(read_stored(path), "qm"))
    assert [m.seq for m in messages] == list(range(1, len(log) + 1))
    assert restored(messages) == log
    assert verify(restored(messages)).ok
    assert state_digest(restored(messages)) == state_digest(log)


def test_a_msgpack_export_goes_back_byte_for_byte(tmp_path: Path) -> None:
    """Bytes this version would encode otherwise (a field it does not know, say from a
    newer writer) and bytes that do not decode at all are stored again as they were."""
    log = seed_log()
    first = msgspec.msgpack.decode(encode_batch(log[0].events))
    first[0]["a_later_field"] = 1
    unusual = msgspec.msgpack.encode(first)
    assert from_message(1, log[0].subject, unusual).events == log[0].events  # it decodes
    garbage = Envelope(len(log) + 1, "qm.requests", [], raw=b"\xc1garbage")
    exported = [Envelope(1, log[0].subject, [], raw=unusual), *log[1:], garbage]
    path = tmp_path / "log.msgpack"
    write_log(path, exported, Format.MSGPACK)
    messages = list(plan(read_stored(path), "qm"))
    assert messages[0].data == unusual and messages[-1].data == b"\xc1garbage"
    assert check(read_stored(path), "qm").events == sum(len(e.events) for e in log)


def test_jsonl_payloads_are_the_bytes_a_stack_stored() -> None:
    """A fixture recorded from a real stack: decoded and encoded again, the same bytes."""
    recorded = list(read_stored(FIXTURES / "seed-scenario-stack.jsonl"))
    for message in recorded:
        assert encode_batch(from_message(*message).events) == message.data


def test_subjects_move_to_the_target_prefix_and_keep_their_family_and_token() -> None:
    log = seed_log()
    moved = list(plan(stored(log), "t7"))
    assert [m.subject for m in moved] == ["t7" + e.subject.removeprefix("qm") for e in log]
    assert check(stored(log), "t7").prefix == "qm"
    again = restored(moved)
    assert verify(again).ok and state_digest(again) == state_digest(log)


@pytest.mark.parametrize(
    ("seqs", "message"),
    [
        ((2, 3, 4), "starts at seq 2"),
        ((1, 2, 4), "jumps from 2 to seq 4"),
        ((1, 1, 2), "jumps from 1 to seq 1"),
    ],
)
def test_positions_that_cannot_be_given_back_refuse_the_whole_file(
    seqs: tuple[int, ...], message: str
) -> None:
    log = seed_log()
    renumbered = [Envelope(seq, e.subject, e.events) for seq, e in zip(seqs, log, strict=False)]
    with pytest.raises(LogFileError, match=message):
        check(stored(renumbered), "qm")


def test_a_subject_under_another_prefix_is_refused() -> None:
    first, second, *_ = seed_log()
    stray = Envelope(2, "other.requests", second.events)
    with pytest.raises(LogFileError, match=r"'other\.requests' is not under the log's prefix 'qm'"):
        check(stored([first, stray]), "qm")


def test_the_summary_counts_messages_and_events() -> None:
    log = seed_log()
    summary = check(stored(log), "qm")
    assert (summary.messages, summary.events) == (len(log), sum(len(e.events) for e in log))
    assert check([], "qm") == (0, 0, "")


@pytest.mark.parametrize(
    ("last_seq", "messages", "snapshots", "expected"),
    [
        (0, 0, 0, None),
        (12, 12, 0, "already holds 12 messages (last seq 12)"),
        (12, 0, 0, "is empty but was used (last seq 12)"),
        (0, 0, 3, "snapshot bucket holds 3 messages"),
    ],
)
def test_only_a_stream_that_never_held_a_message_takes_a_log(
    last_seq: int, messages: int, snapshots: int, expected: str | None
) -> None:
    why = refusal("QM", last_seq, messages, snapshots)
    assert why == expected if expected is None else expected in (why or "")


def test_the_state_digest_tells_a_part_of_the_log_from_the_whole() -> None:
    log = seed_log()
    assert state_digest(log) == state_digest(list(log))
    assert state_digest(log[:-1]) != state_digest(log)
