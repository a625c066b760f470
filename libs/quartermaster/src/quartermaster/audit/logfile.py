"""Exported logs on disk: JSON lines (readable) or framed msgpack (compact, byte-exact).

- JSONL: one envelope per line, `{"seq", "subject", "events": [...]}`.
- msgpack: the magic line `QMLOG1`, then per message a 4-byte big-endian length
  and a msgpack `[seq, subject, data]` where `data` is the message exactly as stored.
- The recorded fixtures of `tests/fixtures/logs/` (one event per line, batches closed
  by `{"batch_end": true}`) read as envelopes too, each event on its producer's subject.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import IO, NamedTuple

import msgspec

from quartermaster import events as ev
from quartermaster.audit.envelope import Envelope, from_message
from quartermaster.audit.errors import LogFileError
from quartermaster.core.provenance import FAMILIES, Family
from quartermaster.eventlog import encode_batch, subjects

MAGIC = b"QMLOG1\n"
_FRAME = struct.Struct(">I")


class Format(StrEnum):
    JSONL = "jsonl"
    MSGPACK = "msgpack"


class _Packed(msgspec.Struct, array_like=True, frozen=True):
    seq: int
    subject: str
    data: bytes


_json_encoder = msgspec.json.Encoder()
_json_decoder = msgspec.json.Decoder(Envelope)
_pack_encoder = msgspec.msgpack.Encoder()
_pack_decoder = msgspec.msgpack.Decoder(_Packed)


class LogWriter:
    """Writes envelopes to an open binary file in one format."""

    def __init__(self, out: IO[bytes], fmt: Format) -> None:
        self._out = out
        self._fmt = fmt
        self.written = 0
        if fmt is Format.MSGPACK:
            out.write(MAGIC)

    def write(self, envelope: Envelope) -> None:
        if self._fmt is Format.JSONL:
            self._out.write(_json_encoder.encode(envelope) + b"\n")
        else:
            data = envelope.raw if envelope.raw is not None else encode_batch(envelope.events)
            frame = _pack_encoder.encode(_Packed(envelope.seq, envelope.subject, data))
            self._out.write(_FRAME.pack(len(frame)) + frame)
        self.written += 1


def write_log(path: Path, envelopes: Iterable[Envelope], fmt: Format = Format.JSONL) -> int:
    with path.open("wb") as out:
        writer = LogWriter(out, fmt)
        for envelope in envelopes:
            writer.write(envelope)
        return writer.written


def read_log(path: Path) -> Iterator[Envelope]:
    """Envelopes of a file in any of the three forms, in log order."""
    try:
        with path.open("rb") as f:
            head = f.read(len(MAGIC))
            f.seek(0)
            if head == MAGIC:
                yield from _read_msgpack(f, path)
            else:
                yield from _read_lines(f, path)
    except OSError as err:
        raise LogFileError(f"{path}: {err.strerror or err}") from err


class Stored(NamedTuple):
    """A message as the stream stored it: its seq, its subject, its bytes."""

    seq: int
    subject: str
    data: bytes


def read_stored(path: Path) -> Iterator[Stored]:
    """The messages of a file as stored: a msgpack export's bytes exactly as they were,
    a JSONL export's (or fixture's) events encoded again (the same bytes for events of
    this version; an older event gets the fields added since, at their defaults)."""
    try:
        with path.open("rb") as f:
            if f.read(len(MAGIC)) == MAGIC:
                for packed in _frames(f, path):
                    yield Stored(packed.seq, packed.subject, packed.data)
                return
            f.seek(0)
            for e in _read_lines(f, path):
                yield Stored(
                    e.seq, e.subject, e.raw if e.raw is not None else encode_batch(e.events)
                )
    except OSError as err:
        raise LogFileError(f"{path}: {err.strerror or err}") from err


def _read_msgpack(f: IO[bytes], path: Path) -> Iterator[Envelope]:
    f.read(len(MAGIC))
    for packed in _frames(f, path):
        yield from_message(packed.seq, packed.subject, packed.data)


def _frames(f: IO[bytes], path: Path) -> Iterator[_Packed]:
    while header := f.read(_FRAME.size):
        if len(header) < _FRAME.size:
            raise LogFileError(f"{path}: truncated frame header")
        (size,) = _FRAME.unpack(header)
        frame = f.read(size)
        if len(frame) < size:
            raise LogFileError(f"{path}: truncated frame")
        try:
            yield _pack_decoder.decode(frame)
        except msgspec.DecodeError as err:
            raise LogFileError(f"{path}: not a log frame ({err})") from err


def _read_lines(f: IO[bytes], path: Path) -> Iterator[Envelope]:
    first = f.readline()
    f.seek(0)
    if b'"batch_end"' in first:
        yield from _read_fixture(f, path)
        return
    for number, line in enumerate(f, start=1):
        if line.strip():
            try:
                yield _json_decoder.decode(line)
            except msgspec.DecodeError as err:
                raise LogFileError(f"{path}:{number}: not a log envelope ({err})") from err


def _read_fixture(f: IO[bytes], path: Path) -> Iterator[Envelope]:
    try:
        records = [json.loads(line) for line in f if line.strip()]
        yield from from_batches(_legacy_batches(records))
    except (msgspec.DecodeError, ValueError, KeyError) as err:
        raise LogFileError(f"{path}: not a recorded fixture ({err})") from err


# ---- recorded fixtures and in-memory histories -----------------------------------


def subject_for(event: ev.Event, queue_of: dict[str, str], prefix: str = subjects.PREFIX) -> str:
    """The subject the event's producer writes it on (`core.provenance`'s families)."""
    families = FAMILIES.get(ev.tag_of(event), frozenset())
    if Family.DECISIONS in families:
        return subjects.decisions(queue_of.get(getattr(event, "job_id", ""), "_unknown"), prefix)
    if Family.HOST_DECISIONS in families:
        return subjects.host_decisions(prefix)
    if Family.REPORTS in families:
        host = getattr(event, "host_id", None) or getattr(event, "host", "")
        return subjects.reports(str(host), prefix)
    if Family.TIMERS in families:
        return subjects.timers(prefix)
    return subjects.requests(prefix)


def from_batches(
    batches: Iterable[Sequence[ev.Event]], prefix: str = subjects.PREFIX
) -> Iterator[Envelope]:
    """Batches of events as the services store them: one message per batch and subject.

    A pass's decisions for several queues, or a step's reports from several hosts,
    become consecutive messages, one per subject, in the batch's order.
    """
    seq = 0
    queue_of: dict[str, str] = {}
    for batch in batches:
        run: list[ev.AnyEvent] = []
        run_subject = ""
        for event in batch:
            if isinstance(event, ev.JobSubmitted):
                queue_of.setdefault(event.job_id, event.job_queue)
            subject = subject_for(event, queue_of, prefix)
            if run and subject != run_subject:
                seq += 1
                yield Envelope(seq, run_subject, run)
                run = []
            run_subject = subject
            run.append(event)  # type: ignore[arg-type]
        if run:
            seq += 1
            yield Envelope(seq, run_subject, run)


def _legacy_batches(lines: Iterable[dict[str, object]]) -> Iterator[list[ev.AnyEvent]]:
    """`{"decision", "event"}` lines, each batch closed by `{"batch_end": true}`."""
    batch: list[ev.AnyEvent] = []
    for record in lines:
        if record.get("batch_end"):
            yield batch
            batch = []
        else:
            batch.append(ev.from_json(json.dumps(record["event"])))
