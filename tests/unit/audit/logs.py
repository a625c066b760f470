"""Logs for the audit tests: the recorded seed fixture and edits of it."""

from __future__ import annotations

from pathlib import Path

import msgspec

from quartermaster.audit import Envelope, read_log
from quartermaster.audit.envelope import decision_token

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
SEED = FIXTURES / "seed-scenario.jsonl"


def seed_log() -> list[Envelope]:
    return list(read_log(SEED))


def decision_messages(envelopes: list[Envelope]) -> list[int]:
    """Indexes of the messages on a decision subject."""
    return [i for i, e in enumerate(envelopes) if decision_token(e.subject) is not None]


def edited(
    envelopes: list[Envelope], index: int, event_index: int, **fields: object
) -> list[Envelope]:
    """The log with one decision's fields changed (as a forger would)."""
    out = list(envelopes)
    e = out[index]
    events = list(e.events)
    events[event_index] = msgspec.structs.replace(events[event_index], **fields)
    out[index] = Envelope(e.seq, e.subject, events)
    return out
