"""Capacity accounting for one (job queue, capacity unit): spec section 3, in one place.

An overlay of the folded state (usage, free hosts) that a pass moves units
through without mutating the state; the pass places jobs with it, and the wait
reasons read it to say which limit stops a job.
"""

from __future__ import annotations

from quartermaster.core.hosts_picker import HostPicker
from quartermaster.core.model import Share
from quartermaster.core.preemption import Freed
from quartermaster.core.state import State
from quartermaster.events import SharingStrategy

LENDERS = (SharingStrategy.LEND, SharingStrategy.LEND_AND_BORROW)


class CapacityView:
    def __init__(self, state: State, queue: str, unit: str, picker: HostPicker) -> None:
        self.state = state
        self.queue = queue
        self.unit = unit
        self.env = state.environment_of(queue)
        self.max_capacity = state.environments[self.env].max_capacity.get(unit, 0)
        self.picker = picker
        self.shares: dict[str, Share] = {s.name: s for s in state.shares_of(queue)}
        # Fixed for the pass: asked many times per head, so computed once.
        self._own = {n: s.own(unit) for n, s in self.shares.items()}
        self._total_own = sum(self._own.values())
        self._reserve = [n for n, s in self.shares.items() if s.strategy is SharingStrategy.RESERVE]
        self._lenders = [n for n, s in self.shares.items() if s.strategy in LENDERS]
        self.use = {n: state.use[(queue, n, unit)] for n in self.shares}
        self.env_use = state.env_use[(self.env, unit)]
        self.free_delta = 0  # hosts a simulation pretends are free (or taken)

    def own(self, name: str) -> int:
        return self._own[name]

    def idle(self, name: str) -> int:
        """`idle_i = max(0, own_i - use_i)`."""
        return max(0, self._own[name] - self.use[name])

    def physical_free(self) -> int:
        """Free healthy hosts the environment may still take (maxCapacity caps them)."""
        hosts = self.picker.count(self.env, self.unit) + self.free_delta
        return max(0, min(self.max_capacity - self.env_use, hosts))

    def reserve_idle(self, name: str) -> dict[str, int]:
        """Idle units of RESERVE shares other than `name`: never given to anyone else."""
        return {
            n: self.idle(n)
            for n, s in self.shares.items()
            if s.strategy is SharingStrategy.RESERVE and n != name and self.idle(n)
        }

    def held_back(self, name: str) -> int:
        own, use = self._own, self.use
        return sum(max(0, own[n] - use[n]) for n in self._reserve if n != name)

    def avail_own(self, name: str) -> int:
        """Free units this share may take: RESERVE shares' idle units are held back."""
        free = self.physical_free()  # none free (the usual busy platform): nothing to hold back
        return max(0, free - self.held_back(name)) if free else 0

    def lendable(self) -> int:
        """Lenders' idle units plus unassigned capacity: what borrowers may hold in all."""
        capacity = self.env_use + self.physical_free()
        unassigned = max(0, capacity - self._total_own)
        return sum(self.idle(n) for n in self._lenders) + unassigned

    def borrowed(self) -> int:
        return sum(max(0, self.use[n] - self.own(n)) for n in self.shares)

    def lending_ok(self) -> bool:
        """Is everything borrowed covered by lenders' idle units plus unassigned capacity?"""
        return self.borrowed() <= self.lendable()

    def within_limits(self, name: str, own_only: bool) -> bool:
        share = self.shares[name]
        if self.use[name] <= self.own(name):
            return True
        if own_only or share.strategy is not SharingStrategy.LEND_AND_BORROW:
            return False
        cap = share.cap(self.unit)
        return (cap is None or self.use[name] <= cap) and self.lending_ok()

    def shift(self, share: str, units: int, hosts: int) -> None:
        """Move `units` into a share's use (negative: out of it) in the overlay."""
        self.use[share] += units
        self.env_use += units
        self.free_delta -= hosts

    def fits_cold(self, name: str, n: int, own_only: bool) -> bool:
        if n > self.avail_own(name):
            return False
        self.shift(name, n, n)
        try:
            return self.within_limits(name, own_only)
        finally:
            self.shift(name, -n, -n)

    def fits_after(self, name: str, n: int, freed: Freed) -> bool:
        """Would `n` cold units fit if the planned units were free now? Leaves no trace."""
        for share, units in freed:
            self.shift(share, -units, -units)
        try:
            return self.fits_cold(name, n, own_only=False)
        finally:
            for share, units in freed:
                self.shift(share, units, units)
