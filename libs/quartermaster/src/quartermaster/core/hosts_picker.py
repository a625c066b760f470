"""Which free hosts a pass hands out: lowest host id first, without touching state.

The pass must not mutate the folded state, so it walks the free-host lists
with cursors and keeps the hosts that pool terminations free in its own list.
One picker serves one pass: the state must not change while it is used.
"""

from __future__ import annotations

from collections import defaultdict

from sortedcontainers import SortedList

from quartermaster.core.state import State


class HostPicker:
    def __init__(self, state: State) -> None:
        self._state = state
        self._unbound_cursor: dict[str, int] = defaultdict(int)
        self._bound_cursor: dict[tuple[str, str], int] = defaultdict(int)
        self._released: dict[tuple[str, str], SortedList] = defaultdict(SortedList)
        self._counts: dict[tuple[str, str], int] = {}  # until the next take or release

    def count(self, env: str, unit: str) -> int:
        """Free hosts left for (env, unit): asked by every unit pass, even a skipped one
        (a hundred queues of one environment ask the same), so it is kept until hosts
        are taken or released."""
        key = (env, unit)
        found = self._counts.get(key)
        if found is None:
            found = self._counts[key] = self._count(key)
        return found

    def _count(self, key: tuple[str, str]) -> int:
        """Read without inserting into the state's dicts or the cursors."""
        unit = key[1]
        unbound = self._state.free_unbound.get(unit)
        bound = self._state.free_bound.get(key)
        released = self._released.get(key)
        return (
            (len(unbound) - self._unbound_cursor.get(unit, 0) if unbound else 0)
            + (len(bound) - self._bound_cursor.get(key, 0) if bound else 0)
            + (len(released) if released else 0)
        )

    def release(self, env: str, unit: str, hosts: tuple[str, ...]) -> None:
        self._counts.clear()  # unbound hosts are shared by environments: forget all
        for host in hosts:
            self._released[(env, unit)].add(host)

    def take(self, env: str, unit: str, n: int) -> tuple[str, ...]:
        self._counts.clear()
        unbound = self._state.free_unbound[unit]
        bound = self._state.free_bound[(env, unit)]
        released = self._released[(env, unit)]
        out: list[str] = []
        for _ in range(n):
            candidates = []
            ui = self._unbound_cursor[unit]
            if ui < len(unbound):
                candidates.append((unbound[ui], 0))
            bi = self._bound_cursor[(env, unit)]
            if bi < len(bound):
                candidates.append((bound[bi], 1))
            if released:
                candidates.append((released[0], 2))
            host, source = min(candidates)
            if source == 0:
                self._unbound_cursor[unit] += 1
            elif source == 1:
                self._bound_cursor[(env, unit)] += 1
            else:
                released.pop(0)
            out.append(host)
        return tuple(out)
