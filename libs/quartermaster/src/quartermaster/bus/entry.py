"""One message read from a stream, as every reader of the log hands it on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple


class LogEntry(NamedTuple):
    seq: int
    subject: str
    data: bytes
    headers: Mapping[str, str]  # the message's own
    num_pending: int = 0  # what the server still had for the reader when it sent this
