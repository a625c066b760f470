"""Instants as auditors type them: `@EPOCH_SECONDS` or an ISO 8601 time (UTC if naive)."""

from __future__ import annotations

import datetime as dt


def epoch_of(text: str) -> float | None:
    """Epoch seconds of `text`, or None when it is neither form (the caller says what it wanted)."""
    if text.startswith("@"):
        try:
            return float(text[1:])
        except ValueError:
            return None
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()
