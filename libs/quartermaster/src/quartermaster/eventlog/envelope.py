"""One log message carries an ordered batch of events (an envelope).

A scheduling pass appends all its decisions as one message, so the batch is
fenced and stored atomically; requests and reports are batches of one or more.
Readers that fold take `admitted`: the events of a message that its subject may
carry (`quartermaster.core.provenance`); the others are logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import msgspec

from quartermaster.core.provenance import family_of, refusal_on
from quartermaster.events import AnyEvent, Event, tag_of

log = logging.getLogger(__name__)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[AnyEvent])


def encode_batch(events: Sequence[Event]) -> bytes:
    return _encoder.encode(events)


def decode_batch(data: bytes) -> list[AnyEvent]:
    return _decoder.decode(data)


def admitted(seq: int, subject: str, data: bytes, prefix: str) -> list[AnyEvent]:
    """The events of message `seq` that may be folded from `subject`.

    An undecodable message (poison) gives no events: it must never block the log
    for everyone. Both cases are logged with subject, seq and kind.
    """
    try:
        events = decode_batch(data)
    except msgspec.DecodeError:  # ValidationError is one too
        log.exception("undecodable message seq=%d subject=%s skipped", seq, subject)
        return []
    found = family_of(subject, prefix)
    kept: list[AnyEvent] = []
    for event in events:
        reason = refusal_on(event, subject, found)
        if reason is None:
            kept.append(event)
        else:
            log.warning(
                "ignored event seq=%d subject=%s kind=%s: %s", seq, subject, tag_of(event), reason
            )
    return kept
