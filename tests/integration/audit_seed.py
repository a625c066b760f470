"""The recorded seed scenario written into a real stream, as the services would have."""

from __future__ import annotations

from pathlib import Path

from quartermaster.audit import Envelope, read_log
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import encode_batch

SEED = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "seed-scenario.jsonl"


def on_prefix(envelope: Envelope, prefix: str) -> Envelope:
    subject = prefix + envelope.subject.removeprefix("qm")
    return Envelope(envelope.seq, subject, envelope.events)


async def append_seed(event_log: JetStreamLog) -> list[Envelope]:
    """Append the seed scenario's messages; returns them as stored (seqs and subjects)."""
    stored = []
    for envelope in read_log(SEED):
        moved = on_prefix(envelope, event_log.prefix)
        seq = await event_log.append(moved.subject, encode_batch(moved.events))
        stored.append(Envelope(seq, moved.subject, moved.events))
    return stored
