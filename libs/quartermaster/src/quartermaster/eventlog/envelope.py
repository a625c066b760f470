"""One log message carries an ordered batch of events (an envelope).

A scheduling pass appends all its decisions as one message, so the batch is
fenced and stored atomically; requests and reports are batches of one or more.
Readers that fold take `admitted`: the events of a message that its subject may
carry (`quartermaster.core.provenance`); the others are logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import msgspec

from quartermaster.core.provenance import family_of, refusal_on
from quartermaster.events import AnyEvent, Event, tag_of
from quartermaster.telemetry import traces

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
        log.exception(
            "undecodable message seq=%d subject=%s skipped", seq, subject, extra={"seq": seq}
        )
        return []
    found = family_of(subject, prefix)
    kept: list[AnyEvent] = []
    for event in events:
        reason = refusal_on(event, subject, found)
        if reason is None:
            kept.append(event)
        else:
            log.warning(
                "ignored event seq=%d subject=%s kind=%s: %s",
                seq,
                subject,
                tag_of(event),
                reason,
                extra={"seq": seq, "job_id": getattr(event, "job_id", None)},
            )
    return kept


# ---- trace context -------------------------------------------------------------
# The W3C traceparent of each event travels in a header of the message, beside the
# batch: the batch's bytes (what folds, what `qm audit verify` re-derives, what the
# scheduler's host decisions dedupe on) are the same with tracing on or off, and
# readers that know nothing of it (older services, exported logs) are unaffected.
# Value: one entry per event in batch order, runs written once (`<tp>*<n>`), `-` for
# an event without one; entries past `MAX_TRACE_HEADER_BYTES` are left out (read as
# none), so tracing never makes a message too big to append.
TRACE_HEADER = "Qm-Trace"
MAX_TRACE_HEADER_BYTES = 8 * 1024
_NO_TRACE = "-"


def trace_header(traceparents: Sequence[str | None]) -> dict[str, str] | None:
    """The header that carries the events' trace contexts; None when no event has one."""
    if not any(traceparents):
        return None
    entries: list[str] = []
    size = 0
    index = 0
    while index < len(traceparents):
        current = traceparents[index]
        run = 1
        while index + run < len(traceparents) and traceparents[index + run] == current:
            run += 1
        entry = current or _NO_TRACE
        if run > 1:
            entry = f"{entry}*{run}"
        size += len(entry) + 1
        if size > MAX_TRACE_HEADER_BYTES:
            log.debug("trace contexts of %d events left out", len(traceparents) - index)
            break
        entries.append(entry)
        index += run
    while entries and entries[-1].startswith(_NO_TRACE):
        entries.pop()
    return {TRACE_HEADER: ",".join(entries)}


def traces_of(headers: Mapping[str, str] | None, count: int) -> list[str | None]:
    """The trace context of each of a message's `count` events (None where it has none).

    A malformed header (any writer may set headers) gives no contexts, never an error.
    """
    found: list[str | None] = []
    value = (headers or {}).get(TRACE_HEADER)
    for entry in value.split(",") if value else ():
        context, _, times = entry.partition("*")
        run = int(times) if times.isdigit() else 1 if not times else 0
        if (
            run <= 0
            or len(found) + run > count
            or not (context == _NO_TRACE or traces.valid(context))
        ):
            return [None] * count
        found.extend([None if context == _NO_TRACE else context] * run)
    return found + [None] * (count - len(found))
