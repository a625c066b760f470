"""Sorted lists by key whose changes from the fold wait until someone reads them.

The fold keeps each index of `State` (queued jobs, victims, free hosts, pools,
deadlines) as a `SortedList` per key, and the pass reads them in order. Most
entries a long replay adds are gone again before anyone reads (a job submitted,
then dispatched, then done), so the fold records only the net change per entry in
a dict (O(1)), and the lists take the changes that are left in one go when they
are read. Every read goes through the dict's own methods, which settle first: a
reader sees exactly what eager `add`/`discard` calls would have left, the same
entries with the same multiplicity, and the same keys (a key is there once the
fold touched it, as with a defaultdict).

A fork (`core.fork`) shares the lists and copies one the first time it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from sortedcontainers import SortedList

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values

K = TypeVar("K", bound=Hashable)


class SortedIndex(dict[K, SortedList]):
    """key -> SortedList; `put`/`drop`/`holds` are the fold's, everything else reads."""

    __slots__ = ("_borrowed", "_pending")

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[K, dict[Any, int]] = {}  # key -> entry -> net count change
        self._borrowed: set[K] = set()  # lists shared with the state this one was forked from

    # ---- the fold's changes ------------------------------------------------
    def put(self, key: K, entry: Any) -> None:
        """`self[key].add(entry)`, later."""
        changes = self._pending.get(key)
        if changes is None:
            self._pending[key] = {entry: 1}
            return
        delta = changes.get(entry)
        changes[entry] = 1 if delta is None else delta + 1

    def drop(self, key: K, entry: Any) -> None:
        """`self[key].discard(entry)`, later: removes one copy if there is one."""
        changes = self._pending.get(key)
        if changes is None:
            changes = self._pending[key] = {}  # the key exists from now on, as eagerly
            delta = 0
        else:
            delta = changes.pop(entry, 0)
        if delta > 0:  # cancels an addition not yet applied
            if delta > 1:
                changes[entry] = delta - 1
        elif self._listed(key, entry, delta) > -delta:
            changes[entry] = delta - 1
        elif delta:
            changes[entry] = delta  # nothing left to remove: as it was

    def holds(self, key: K, entry: Any) -> bool:
        """`entry in self[key]`, without applying anything."""
        changes = self._pending.get(key)
        delta = changes.get(entry, 0) if changes is not None else 0
        return delta > 0 or self._listed(key, entry, delta) > -delta

    def _listed(self, key: K, entry: Any, delta: int) -> int:
        """Copies of `entry` in the list as applied (exact up to `1 - delta`)."""
        found = dict.get(self, key)
        if not found:
            return 0
        if delta == 0:
            return 1 if entry in found else 0
        return int(found.count(entry))

    # ---- applying ------------------------------------------------------------
    def settle(self) -> None:
        """Apply what the fold left: additions sorted in one go, then the removals."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        for key, changes in pending.items():
            found = self._own(key)
            added: list[Any] = []
            for entry, delta in changes.items():
                if delta > 0:
                    added.extend([entry] * delta) if delta > 1 else added.append(entry)
                else:
                    for _ in range(-delta):
                        found.remove(entry)
            if added:
                found.update(added)

    def _own(self, key: K) -> SortedList:
        found = dict.get(self, key)
        if found is None:
            found = SortedList()
            dict.__setitem__(self, key, found)
        elif key in self._borrowed:
            found = SortedList(found)
            dict.__setitem__(self, key, found)
            self._borrowed.discard(key)
        return found

    def fork(self) -> SortedIndex[K]:
        """A copy that shares the lists until it changes one."""
        self.settle()
        forked: SortedIndex[K] = SortedIndex()
        dict.update(forked, self)
        forked._borrowed = set(self)
        return forked

    # ---- reads: settle first -------------------------------------------------
    def __missing__(self, key: K) -> SortedList:
        found = SortedList()
        dict.__setitem__(self, key, found)
        return found

    def __getitem__(self, key: K) -> SortedList:
        if self._pending:
            self.settle()
        return dict.__getitem__(self, key)

    def get(self, key: K, default: Any = None) -> Any:
        if self._pending:
            self.settle()
        return dict.get(self, key, default)

    def __setitem__(self, key: K, value: SortedList) -> None:
        self.settle()
        self._borrowed.discard(key)
        dict.__setitem__(self, key, value)

    def __contains__(self, key: object) -> bool:
        self.settle()
        return dict.__contains__(self, key)

    def __iter__(self) -> Iterator[K]:
        self.settle()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self.settle()
        return dict.__len__(self)

    def __eq__(self, other: object) -> bool:
        self.settle()
        if isinstance(other, SortedIndex):
            other.settle()
        return dict.__eq__(self, other)

    __hash__ = None

    def __repr__(self) -> str:
        self.settle()
        return f"SortedIndex({dict.__repr__(self)})"

    def keys(self) -> dict_keys[K, SortedList]:
        self.settle()
        return dict.keys(self)

    def values(self) -> dict_values[K, SortedList]:
        self.settle()
        return dict.values(self)

    def items(self) -> dict_items[K, SortedList]:
        self.settle()
        return dict.items(self)

    def pop(self, key: K, *default: Any) -> Any:
        self.settle()
        self._borrowed.discard(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key: K, default: Any = None) -> Any:
        self.settle()
        return dict.setdefault(self, key, default)

    def copy(self) -> dict[K, SortedList]:
        self.settle()
        return dict(dict.items(self))

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        self.settle()
        return (_rebuild, (dict(dict.items(self)),))


def _rebuild(lists: dict[Any, SortedList]) -> SortedIndex[Any]:
    index: SortedIndex[Any] = SortedIndex()
    dict.update(index, lists)
    return index
