"""Exported log files: both forms round-trip every envelope, garbage included."""

from __future__ import annotations

from pathlib import Path

import pytest
from logs import seed_log

from quartermaster.audit import Format, read_log, write_log
from quartermaster.audit.envelope import Envelope, admit, from_message, prefix_of
from quartermaster.audit.errors import LogFileError


@pytest.mark.parametrize("fmt", list(Format))
def test_a_written_log_reads_back_the_same(tmp_path: Path, fmt: Format) -> None:
    log = [*seed_log(), from_message(99, "qm.requests", b"\xc1garbage")]
    path = tmp_path / f"log.{fmt.value}"
    assert write_log(path, log, fmt) == len(log)
    assert list(read_log(path)) == log


def test_an_undecodable_message_keeps_its_bytes_and_folds_nothing() -> None:
    envelope = from_message(7, "qm.requests", b"\xc1")
    assert envelope.raw == b"\xc1" and envelope.events == []
    kept, ignored = admit(envelope)
    assert kept == [] and ignored[0].why == "undecodable message"


def test_prefixes_are_read_from_any_subject() -> None:
    assert prefix_of("qm.decisions.q") == "qm"
    assert prefix_of("t12.reports.h1") == "t12"
    assert prefix_of("a.b.requests") == "a.b"
    assert prefix_of("nonsense") == ""


def test_a_line_that_is_no_envelope_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"seq": 1, "subject": "qm.requests", "events": []}\n{"seq": "x"}\n')
    with pytest.raises(LogFileError, match=r"bad\.jsonl:2"):
        list(read_log(path))


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LogFileError, match=r"nope\.jsonl"):
        list(read_log(tmp_path / "nope.jsonl"))


def test_the_fixture_puts_every_event_on_its_producers_subject() -> None:
    log = seed_log()
    assert all(admit(e)[1] == [] for e in log)
    assert {e.subject for e in log} == {
        "qm.requests",
        "qm.decisions.q",
        "qm.reports.h1",
        "qm.reports.h2",
        "qm.reports.h3",
    }
    assert all(isinstance(e, Envelope) for e in log)
