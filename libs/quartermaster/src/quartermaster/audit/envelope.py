"""One log message as an auditor sees it: its position, its subject and its events.

The same shape for every source (the live stream, an exported file, a recorded
fixture), so export, verify, explain and simulate never care where a log came from.
Replays fold only what a message's subject may carry (`core.provenance`), exactly
like the services' followers; `admit` also says what it left out and why.
"""

from __future__ import annotations

import functools

import msgspec

from quartermaster.core.provenance import HOSTS_TOKEN, Family, family_of, refusal_on
from quartermaster.eventlog import decode_batch
from quartermaster.events import AnyEvent, Event, tag_of

DECISIONS = "decisions"
__all__ = ["HOSTS_TOKEN", "Envelope", "Ignored", "admit", "decision_token", "from_message"]


class Envelope(msgspec.Struct, frozen=True):
    """A stored message. `raw` keeps a message that did not decode; it folds as nothing."""

    seq: int
    subject: str
    events: list[AnyEvent]
    raw: bytes | None = None


class Ignored(msgspec.Struct, frozen=True):
    """An event a replay does not fold: undecodable, or on a subject its kind may not use."""

    seq: int
    subject: str
    kind: str
    why: str


def from_message(seq: int, subject: str, data: bytes) -> Envelope:
    """Decode a stored message like the services do: garbage never stops a replay."""
    try:
        return Envelope(seq, subject, decode_batch(data))
    except msgspec.DecodeError:
        return Envelope(seq, subject, [], raw=data)


def prefix_of(subject: str) -> str:
    """The subject prefix of a log subject (`qm.decisions.q` -> `qm`); "" if none fits."""
    for family in (".requests", ".timers"):
        if subject.endswith(family):
            return subject[: -len(family)]
    head, _, _ = subject.rpartition(".")
    prefix, _, family = head.rpartition(".")
    return prefix if family in (DECISIONS, "reports") else ""


@functools.lru_cache(maxsize=4096)
def _family(subject: str) -> tuple[Family, str] | None:
    """A subject's family, parsed once per subject (a log has few: queues, hosts)."""
    return family_of(subject, prefix_of(subject))


_UNJUDGED = object()
_JUDGED: dict[tuple[type[Event], str, object], str | None] = {}  # (kind, subject, host) -> why


def admit(envelope: Envelope) -> tuple[list[AnyEvent], list[Ignored]]:
    """The events a follower folds from this message, and those it leaves out."""
    if envelope.raw is not None:
        return [], [Ignored(envelope.seq, envelope.subject, "?", "undecodable message")]
    subject = envelope.subject
    found = _family(subject)
    # The rule looks at the kind, the subject and, on a host's subject, the host named.
    reports = found is not None and found[0] is Family.REPORTS
    whys: list[str | None] = []
    for event in envelope.events:
        host = (
            (getattr(event, "host_id", None) or getattr(event, "host", None)) if reports else None
        )
        key = (type(event), subject, host)
        why = _JUDGED.get(key, _UNJUDGED)
        if why is _UNJUDGED:
            if len(_JUDGED) > 65536:
                _JUDGED.clear()
            why = _JUDGED[key] = refusal_on(event, subject, found)
        whys.append(why)  # type: ignore[arg-type]
    if not any(whys):
        return envelope.events, []
    kept = [e for e, why in zip(envelope.events, whys, strict=True) if why is None]
    ignored = [
        Ignored(envelope.seq, subject, tag_of(e), why)
        for e, why in zip(envelope.events, whys, strict=True)
        if why is not None
    ]
    return kept, ignored


@functools.lru_cache(maxsize=4096)
def decision_token(subject: str) -> str | None:
    """`qm.decisions.<token>` -> `<token>` (a queue's token, or `_hosts`); None otherwise."""
    head, sep, token = subject.rpartition(".")
    if not sep or not (head == DECISIONS or head.endswith("." + DECISIONS)):
        return None
    return token
