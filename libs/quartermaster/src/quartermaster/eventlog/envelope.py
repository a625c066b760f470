"""One log message carries an ordered batch of events (an envelope).

A scheduling pass appends all its decisions as one message, so the batch is
fenced and stored atomically; requests and reports are batches of one or more.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from quartermaster.events import AnyEvent, Event

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(list[AnyEvent])


def encode_batch(events: Sequence[Event]) -> bytes:
    return _encoder.encode(events)


def decode_batch(data: bytes) -> list[AnyEvent]:
    return _decoder.decode(data)
