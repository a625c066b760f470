"""A folded state as plain data, for tests that compare two states whole."""

from __future__ import annotations

from typing import Any

import msgspec
from sortedcontainers import SortedList

from quartermaster.core import State
from quartermaster.core.replay import INDEXES


def image(state: State) -> dict[str, Any]:
    """Everything a State holds, empty index lists included (a key is part of it)."""

    def plain(value: Any) -> Any:
        if isinstance(value, SortedList | set):
            return sorted(value)
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in sorted(value.items(), key=str)}
        return msgspec.to_builtins(value)

    return {name: plain(value) for name, value in vars(state).items()}


def image_of_entries(state: State) -> dict[str, Any]:
    """`image`, less the index keys with no entries: a replay or a snapshot derives only
    what is there, where the fold leaves a key it once touched (no reader tells them apart)."""
    seen = image(state)
    for name in INDEXES:
        seen[name] = {key: entries for key, entries in seen[name].items() if entries}
    return seen
