"""`qm log export`: the stream, or a range of it, into a file an auditor can keep.

Written to a temporary file beside the target and renamed at the end, so a file
that exists is a whole export. Needs the `bus` extra.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from quartermaster.audit.logfile import Format, LogWriter
from quartermaster.audit.settings import AuditSettings
from quartermaster.audit.stream import open_log, read_range
from quartermaster.bus import JetStreamLog


class Exported(msgspec.Struct, frozen=True):
    messages: int
    events: int
    first_seq: int
    last_seq: int


async def export(
    settings: AuditSettings,
    out: Path,
    fmt: Format = Format.JSONL,
    from_seq: int = 1,
    to_seq: int | None = None,
) -> Exported:
    async with open_log(settings) as event_log:
        return await export_from(event_log, out, fmt, from_seq, to_seq)


async def export_from(
    event_log: JetStreamLog,
    out: Path,
    fmt: Format = Format.JSONL,
    from_seq: int = 1,
    to_seq: int | None = None,
) -> Exported:
    """Write the open log's range to `out` (whole, or not at all)."""
    partial = out.with_name(out.name + ".partial")
    messages = events = first = last = 0
    try:
        with partial.open("wb") as f:
            writer = LogWriter(f, fmt)
            async for envelope in read_range(event_log, from_seq, to_seq):
                writer.write(envelope)
                messages += 1
                events += len(envelope.events)
                first = first or envelope.seq
                last = envelope.seq
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return Exported(messages, events, first, last)
