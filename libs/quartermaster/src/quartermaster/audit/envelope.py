"""One log message as an auditor sees it: its position, its subject and its events.

The same shape for every source (the live stream, an exported file, a recorded
fixture), so export, verify, explain and simulate never care where a log came from.
"""

from __future__ import annotations

import msgspec

from quartermaster.eventlog import decode_batch
from quartermaster.events import AnyEvent

DECISIONS = "decisions"
HOSTS_TOKEN = "_hosts"


class Envelope(msgspec.Struct, frozen=True):
    """A stored message. `raw` keeps a message that did not decode; it folds as nothing."""

    seq: int
    subject: str
    events: list[AnyEvent]
    raw: bytes | None = None


def from_message(seq: int, subject: str, data: bytes) -> Envelope:
    """Decode a stored message like the services do: garbage never stops a replay."""
    try:
        return Envelope(seq, subject, decode_batch(data))
    except msgspec.DecodeError:
        return Envelope(seq, subject, [], raw=data)


def decision_token(subject: str) -> str | None:
    """`qm.decisions.<token>` -> `<token>` (a queue's token, or `_hosts`); None otherwise."""
    head, sep, token = subject.rpartition(".")
    if not sep or not (head == DECISIONS or head.endswith("." + DECISIONS)):
        return None
    return token
