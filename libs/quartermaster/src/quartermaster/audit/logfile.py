"""Exported logs on disk: JSON lines (readable) or framed msgpack (compact, byte-exact).

- JSONL: one envelope per line, `{"seq", "subject", "events": [...]}`.
- msgpack: the magic line `QMLOG1`, then per message a 4-byte big-endian length
  and a msgpack `[seq, subject, data]` where `data` is the message exactly as stored.
- The recorded fixtures of `tests/fixtures/logs/` (one event per line, batches closed
  by `{"batch_end": true}`) read as envelopes too, with subjects inferred.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import IO

import msgspec

from quartermaster import events as ev
from quartermaster.audit.envelope import Envelope, from_message
from quartermaster.audit.errors import LogFileError
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


def _read_msgpack(f: IO[bytes], path: Path) -> Iterator[Envelope]:
    f.read(len(MAGIC))
    while header := f.read(_FRAME.size):
        if len(header) < _FRAME.size:
            raise LogFileError(f"{path}: truncated frame header")
        (size,) = _FRAME.unpack(header)
        frame = f.read(size)
        if len(frame) < size:
            raise LogFileError(f"{path}: truncated frame")
        packed = _pack_decoder.decode(frame)
        yield from_message(packed.seq, packed.subject, packed.data)


def _read_lines(f: IO[bytes], path: Path) -> Iterator[Envelope]:
    legacy: _LegacyBatches | None = None
    for number, line in enumerate(f, start=1):
        if not line.strip():
            continue
        if legacy is None and number == 1 and b'"batch_end"' in line:
            legacy = _LegacyBatches()
        try:
            if legacy is not None:
                envelope = legacy.feed(json.loads(line))
                if envelope is not None:
                    yield envelope
                continue
            yield _json_decoder.decode(line)
        except (msgspec.DecodeError, ValueError, KeyError) as err:
            raise LogFileError(f"{path}:{number}: not a log envelope ({err})") from err


# ---- recorded fixtures (one event per line) -----------------------------------

_REPORTS = (
    ev.HostRegistered,
    ev.HostHeartbeat,
    ev.JobStarting,
    ev.JobRunning,
    ev.JobSucceeded,
    ev.JobFailed,
    ev.JobStopConfirmed,
)


class _LegacyBatches:
    """Turns `{"decision", "event"}` lines closed by `{"batch_end"}` into envelopes."""

    def __init__(self) -> None:
        self.seq = 0
        self.events: list[ev.AnyEvent] = []
        self.decision = False
        self.queue_of: dict[str, str] = {}

    def feed(self, record: dict[str, object]) -> Envelope | None:
        if not record.get("batch_end"):
            event = ev.from_json(json.dumps(record["event"]))
            if isinstance(event, ev.JobSubmitted):
                self.queue_of[event.job_id] = event.job_queue
            self.events.append(event)
            self.decision = bool(record.get("decision"))
            return None
        batch, self.events = self.events, []
        self.seq += 1
        return Envelope(self.seq, self._subject(batch), batch)

    def _subject(self, batch: list[ev.AnyEvent]) -> str:
        first = batch[0] if batch else None
        if self.decision and first is not None:
            if isinstance(first, ev.HostLost):
                return subjects.host_decisions()
            job_id = getattr(first, "job_id", "")
            return subjects.decisions(self.queue_of.get(job_id, "_unknown"))
        if isinstance(first, _REPORTS):
            return subjects.reports(getattr(first, "host", "") or getattr(first, "host_id", ""))
        if isinstance(first, ev.ClockTicked):
            return subjects.timers()
        return subjects.requests()
