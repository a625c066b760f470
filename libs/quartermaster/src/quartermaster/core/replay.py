"""A replay: many events folded before anyone reads, the sorted indexes derived at its end.

The fold keeps `State`'s sorted indexes (queued jobs, victims, free hosts, pools,
deadlines) as it goes, which is a third of its time. A replay (a restart refolding
the log, an auditor's fold up to a point) reads nothing until it is done, and
each index is a function of the entities (`derive_indexes`, which a snapshot's
restore uses too). So inside `replaying` the fold's index changes go nowhere, and
the indexes are derived once on the way out: O(entities), not O(events).
Everything else the fold keeps (use, stopping, change counters, the entities) is
kept as always. A read of an index inside a replay raises `ReplayInProgress`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from sortedcontainers import SortedList

from quartermaster.core.model import ACTIVE_STATUSES, HOST_HEALTHY, POOL_AVAILABLE, RUNNABLE
from quartermaster.core.preemption import victim_order
from quartermaster.core.sorted_index import SortedIndex
from quartermaster.core.state import DEADLINES, POOL_EXPIRIES, State

INDEXES = ("runnable", "victims", "free_unbound", "free_bound", "available_pools", "timeline")


class ReplayInProgress(RuntimeError):
    """An index was read inside `replaying`: it is derived only at the replay's end."""


class _Unkept:
    """Stands in for each sorted index of a state during a replay: changes go nowhere."""

    __slots__ = ()

    def put(self, key: Any, entry: Any) -> None:
        pass

    def drop(self, key: Any, entry: Any) -> None:
        pass

    def _read(self, *args: Any) -> NoReturn:
        raise ReplayInProgress("a state's indexes are read only after its replay ends")

    __getitem__ = get = items = keys = values = __iter__ = __contains__ = __len__ = _read
    settle = fork = holds = _read


UNKEPT = _Unkept()


@contextmanager
def replaying(state: State) -> Iterator[State]:
    """Fold into `state` inside; its indexes are derived from its entities on the way out
    (also when the fold raises: the state is then the one of the events folded so far).
    Inside an outer replay, this one leaves the deriving to it."""
    if state.runnable is UNKEPT:  # type: ignore[comparison-overlap]
        yield state
        return
    for name in INDEXES:
        setattr(state, name, UNKEPT)
    try:
        yield state
    finally:
        derive_indexes(state)


def derive_indexes(state: State) -> None:
    """Every sorted index from the entities, each list sorted once (not one insertion at a
    time); the change counters are left as they are (nothing changed but the indexes)."""
    free: dict[tuple[str | None, str], list[str]] = defaultdict(list)
    for host in state.hosts.values():
        if host.holder is None and host.status is HOST_HEALTHY:
            free[(host.environment, host.unit)].append(host.host_id)
    runnable: dict[tuple[str, str, str], list[tuple[int, float, str, str]]] = defaultdict(list)
    victims: dict[tuple[str, str, str], list[tuple[int, float, str]]] = defaultdict(list)
    deadlines: list[tuple[float, str]] = []
    for job in state.jobs.values():
        if job.awaiting_outcome:
            continue
        if job.status is RUNNABLE:
            runnable[(job.queue, job.share, job.unit)].append(job.queue_entry())  # as enqueue
        elif job.status in ACTIVE_STATUSES and job.stop_cause is None:
            victims[(job.queue, job.share, job.unit)].append(victim_order(job))
            deadline = job.deadline()
            if deadline is not None:
                deadlines.append((deadline, job.job_id))
    pools: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    expiries: list[tuple[float, str]] = []
    for pool in state.pools.values():
        if pool.status is POOL_AVAILABLE:
            assert pool.expires_at is not None
            entry = (pool.expires_at, pool.job_id)  # as State.index_pool
            pools[(pool.environment, pool.unit)].append(entry)
            expiries.append(entry)
    state.free_unbound = _index({unit: ids for (env, unit), ids in free.items() if env is None})
    state.free_bound = _index({key: ids for key, ids in free.items() if key[0] is not None})
    state.runnable = _index(runnable)
    state.victims = _index(victims)
    state.available_pools = _index(pools)
    state.timeline = _index({DEADLINES: deadlines, POOL_EXPIRIES: expiries})


def _index(lists: dict[Any, list[Any]]) -> SortedIndex[Any]:
    index: SortedIndex[Any] = SortedIndex()
    for key, entries in lists.items():
        dict.__setitem__(index, key, SortedList(entries))
    return index
