"""What restoring an exported log writes: every message again, at its own seq (pure).

`qm audit verify` and the services' fences read stream positions (a decision names
the message it was decided after; appends expect the last seq of their subject), so
a restored log must hold each message at the seq it had: the file must run from
seq 1 without gaps, and the target stream must never have held a message (`refusal`).
Payloads are the bytes as stored (a msgpack export keeps them) or, from a JSONL export,
the batch encoded again (`logfile.read_stored`): the same bytes for events of this version.
Subjects keep their family and token; only the subject prefix may change, to the
target stream's. No I/O here: `audit.log_import` writes the plan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import msgspec

from quartermaster.audit.envelope import Envelope, prefix_of
from quartermaster.audit.errors import LogFileError
from quartermaster.audit.logfile import Stored
from quartermaster.audit.replay import fold_until
from quartermaster.core.snapshot import take
from quartermaster.eventlog import decode_batch

MSG_ID_PREFIX = "qm-restore:"


class Summary(NamedTuple):
    """A checked file: what it holds, and the prefix its subjects were written under."""

    messages: int
    events: int
    prefix: str  # "" for an empty file


def msg_id(seq: int) -> str:
    """The `Nats-Msg-Id` of the restored message at `seq` (chains the fenced batches)."""
    return f"{MSG_ID_PREFIX}{seq}"


def plan(messages: Iterable[Stored], prefix: str) -> Iterator[Stored]:
    """The messages to append, in order, checked as they come.

    Raises `LogFileError` where the seqs do not run 1, 2, 3, ... (a range export or a
    log with deleted messages cannot be given back its positions) or a subject is
    not under the file's prefix (taken from the first message)."""
    expected = 1
    old: str | None = None
    for message in messages:
        if message.seq != expected:
            where = "starts at" if expected == 1 else f"jumps from {expected - 1} to"
            raise LogFileError(
                f"the log {where} seq {message.seq}: a restore needs every message from "
                "seq 1 (export the whole stream)"
            )
        if old is None:
            old = prefix_of(message.subject) or prefix
        yield Stored(message.seq, moved(message.subject, old, prefix), message.data)
        expected += 1


def check(messages: Iterable[Stored], prefix: str) -> Summary:
    """Run the whole plan without writing: a bad file fails here, before any append."""
    found = ""

    def noting() -> Iterator[Stored]:
        nonlocal found
        for message in messages:
            found = found or prefix_of(message.subject) or prefix
            yield message

    count = events = 0
    for message in plan(noting(), prefix):
        count += 1
        events += _events_in(message.data)
    return Summary(count, events, found)


def _events_in(data: bytes) -> int:
    """Events of a stored batch (0 for one that does not decode: it goes back as it is)."""
    try:
        return len(decode_batch(data))
    except msgspec.DecodeError:
        return 0


def moved(subject: str, old: str, new: str) -> str:
    """`subject` under prefix `new` instead of `old` (`qm.decisions.q` -> `p.decisions.q`)."""
    if not subject.startswith(old + "."):
        raise LogFileError(f"subject {subject!r} is not under the log's prefix {old!r}")
    return new + subject[len(old) :]


def refusal(stream: str, last_seq: int, messages: int, snapshots: int = 0) -> str | None:
    """Why the target cannot take the log, or None where it can.

    A stream that held messages (even purged ones) would number them from its last
    seq on; the scheduler's snapshots of another log would be restored over this one."""
    if messages:
        return (
            f"stream {stream} already holds {messages} messages (last seq {last_seq}): "
            "a log is restored only into an empty stream"
        )
    if last_seq:
        return (
            f"stream {stream} is empty but was used (last seq {last_seq}): delete it and "
            "restore again, so the messages get their own seqs back"
        )
    if snapshots:
        return (
            f"the scheduler's snapshot bucket holds {snapshots} messages of another log: "
            "delete it (or start from an empty cluster) and restore again"
        )
    return None


def state_digest(envelopes: Iterable[Envelope]) -> str:
    """sha256 of the state the log folds to (as the services fold it): two logs that
    rebuild the same resources, jobs, attempts, hosts and warm pools have the same."""
    state, position = fold_until(envelopes)
    return hashlib.sha256(take(state, position)).hexdigest()
