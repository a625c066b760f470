"""A copy of the state to try things on (a dry run), copied only where it is touched.

A full copy of 100k jobs takes about a second (snapshot and restore); a dry run
folds a submission and a few decisions. A fork shares everything with the
original until the fold reaches for it: an entity is copied the first time it
is looked up, an index list the first time the fold's changes reach it
(`SortedIndex.fork`). Small containers are copied at once.
Nothing done to the fork changes the original.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable
from typing import Any, TypeVar

from quartermaster.core.model import Job
from quartermaster.core.sorted_index import SortedIndex
from quartermaster.core.state import State

K = TypeVar("K")
V = TypeVar("V")


class _CopyOnTouch(dict[K, V]):
    """Values are the original's until `[key]` takes them: then a copy, this fork's own.

    `get`, `values` and `items` take values too (copies); keys, `in` and `len`
    never copy.
    """

    def __init__(self, base: dict[K, V], copier: Callable[[V], V], default: Callable[[], V] | None):
        super().__init__(base)
        self._copier = copier
        self._default = default
        self._own: set[K] = set()

    def __getitem__(self, key: K) -> V:
        if key not in self._own:
            if dict.__contains__(self, key):
                dict.__setitem__(self, key, self._copier(dict.__getitem__(self, key)))
            elif self._default is not None:
                dict.__setitem__(self, key, self._default())
            else:
                raise KeyError(key)
            self._own.add(key)
        return dict.__getitem__(self, key)

    def seal(self) -> None:
        self._copier = _same

    def __setitem__(self, key: K, value: V) -> None:
        dict.__setitem__(self, key, value)
        self._own.add(key)

    def get(self, key: K, default: Any = None) -> Any:
        return self[key] if dict.__contains__(self, key) else default

    def values(self) -> list[V]:  # type: ignore[override]
        return [self[key] for key in list(self)]

    def items(self) -> list[tuple[K, V]]:  # type: ignore[override]
        return [(key, self[key]) for key in list(self)]

    def pop(self, key: K, *default: Any) -> Any:
        if dict.__contains__(self, key):
            value = self[key]
            dict.__delitem__(self, key)
            return value
        if default:
            return default[0]
        raise KeyError(key)


def _same(value: V) -> V:
    return value


def _job(job: Job) -> Job:
    mine = copy.copy(job)
    copies = {id(a): copy.copy(a) for a in job.attempts}
    mine.attempts = tuple(copies[id(a)] for a in job.attempts)  # the fold edits an attempt
    mine.recent_preemptions = tuple(copies.get(id(a), a) for a in job.recent_preemptions)
    mine.tags = dict(job.tags)
    return mine


_HOW: dict[str, Callable[[Any], Any]] = {
    "now": lambda v: v,
    "seq": lambda v: v,
    "environments": dict,
    "policies": dict,
    "policy_tags": dict,  # the fold replaces a policy's tags, never changes them in place
    "queues": lambda v: {k: copy.copy(q) for k, q in v.items()},
    "shares": dict,  # the fold replaces a share, never changes one in place
    "jobs": lambda v: _CopyOnTouch(v, _job, None),
    "hosts": lambda v: _CopyOnTouch(v, copy.copy, None),
    "pools": lambda v: _CopyOnTouch(v, copy.copy, None),
    "runnable": SortedIndex.fork,
    "victims": SortedIndex.fork,
    "use": lambda v: defaultdict(int, v),
    "stopping": lambda v: defaultdict(int, v),
    "env_use": lambda v: defaultdict(int, v),
    "free_unbound": SortedIndex.fork,
    "free_bound": SortedIndex.fork,
    "available_pools": SortedIndex.fork,
    "timeline": SortedIndex.fork,
    "awaiting_outcome": set,
    "retained": set,
    "queue_shares": lambda v: defaultdict(dict, {q: dict(s) for q, s in v.items()}),
    "queue_version": lambda v: defaultdict(int, v),
    "config_version": lambda v: v,
    "pools_version": lambda v: defaultdict(int, v),
    "retention_seconds": lambda v: v,
    "next_sweep": lambda v: v,
}


def seal(forked: State) -> None:
    """The fork will not be changed any more: from now on reads share, not copy."""
    for value in vars(forked).values():
        if isinstance(value, _CopyOnTouch):
            value.seal()


def fork(state: State) -> State:
    """A state equal to `state` that can be folded and decided on without touching it."""
    forked = State.__new__(State)
    for name, value in vars(state).items():
        how = _HOW.get(name)
        if how is None:  # a new State attribute: say how a fork copies it
            raise TypeError(f"fork does not know how to copy State.{name}")
        setattr(forked, name, how(value))
    return forked
