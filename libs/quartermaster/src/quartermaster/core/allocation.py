"""The allocation step of a pass for one (job queue, capacity unit): spec section 4.

Works on an overlay of the folded state (usage, free hosts, queue cursors,
consumed pools) so that it hands out many units in one pass without mutating
the state. Phases: own quota, borrowing (FIFO), then making room for blocked
heads (terminating warm pools, reclaiming from borrowers, in-share preemption).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from quartermaster import events as ev
from quartermaster.core import misconfiguration
from quartermaster.core.hosts_picker import HostPicker
from quartermaster.core.housekeeping import billable
from quartermaster.core.model import Job, Share, WarmPool
from quartermaster.core.state import State
from quartermaster.events import SharingStrategy

LENDERS = (SharingStrategy.LEND, SharingStrategy.LEND_AND_BORROW)
Freed = list[tuple[str, int]]  # (share, units) that a plan would free


class UnitPass:
    def __init__(
        self, state: State, queue: str, unit: str, picker: HostPicker, out: list[ev.Event]
    ) -> None:
        self.state = state
        self.queue = queue
        self.unit = unit
        self.env = state.environment_of(queue)
        self.max_capacity = state.environments[self.env].max_capacity.get(unit, 0)
        self.picker = picker
        self.out = out
        self.now = state.now
        self.shares: dict[str, Share] = {s.name: s for s in state.shares_of(queue)}
        self.use = {n: state.use[(queue, n, unit)] for n in self.shares}
        self.env_use = state.env_use[(self.env, unit)]
        self.free_delta = 0  # hosts a simulation pretends are free (or taken)
        self.cursor = dict.fromkeys(self.shares, 0)
        self.consumed_pools: set[str] = set()
        self.victimised: set[str] = set()
        # Units held by attempts whose stop is pending: free soon, promised once.
        self.stopping = {n: state.stopping[(queue, n, unit)] for n in self.shares}
        self.incoming = dict(self.stopping)

    # ---- capacity arithmetic (spec section 3) -------------------------------
    def own(self, name: str) -> int:
        return self.shares[name].own(self.unit)

    def idle(self, name: str) -> int:
        return max(0, self.own(name) - self.use[name])

    def physical_free(self) -> int:
        hosts = self.picker.count(self.env, self.unit) + self.free_delta
        return max(0, min(self.max_capacity - self.env_use, hosts))

    def held_back(self, name: str) -> int:
        """Idle units of RESERVE shares (other than `name`): never given to anyone else."""
        return sum(
            self.idle(n)
            for n, s in self.shares.items()
            if s.strategy is SharingStrategy.RESERVE and n != name
        )

    def avail_own(self, name: str) -> int:
        """Free units this share may take: RESERVE shares' idle units are held back."""
        return max(0, self.physical_free() - self.held_back(name))

    def lending_ok(self) -> bool:
        """Is everything borrowed covered by lenders' idle units plus unassigned capacity?"""
        capacity = self.env_use + self.physical_free()
        unassigned = max(0, capacity - sum(self.own(n) for n in self.shares))
        lendable = sum(self.idle(n) for n, s in self.shares.items() if s.strategy in LENDERS)
        borrowed = sum(max(0, self.use[n] - self.own(n)) for n in self.shares)
        return borrowed <= lendable + unassigned

    def within_limits(self, name: str, own_only: bool) -> bool:
        share = self.shares[name]
        if self.use[name] <= self.own(name):
            return True
        if own_only or share.strategy is not SharingStrategy.LEND_AND_BORROW:
            return False
        cap = share.cap(self.unit)
        return (cap is None or self.use[name] <= cap) and self.lending_ok()

    def _shift(self, share: str, units: int, hosts: int) -> None:
        """Move `units` into a share's use (negative: out of it) in the overlay."""
        self.use[share] += units
        self.env_use += units
        self.free_delta -= hosts

    def fits_cold(self, name: str, n: int, own_only: bool) -> bool:
        if n > self.avail_own(name):
            return False
        self._shift(name, n, n)
        try:
            return self.within_limits(name, own_only)
        finally:
            self._shift(name, -n, -n)

    def fits_after(self, name: str, job: Job, freed: Freed) -> bool:
        """Would the job fit if the planned units were free now? Leaves no trace."""
        for share, units in freed:
            self._shift(share, -units, -units)
        try:
            return self.fits_cold(name, job.count, own_only=False)
        finally:
            for share, units in freed:
                self._shift(share, units, units)

    # ---- queue heads ------------------------------------------------------
    def head(self, name: str) -> Job | None:
        """The share's next job in dispatch order, skipping (and labelling) misfits."""
        runnable = self.state.runnable.get((self.queue, name, self.unit))
        if not runnable:
            return None
        while self.cursor[name] < len(runnable):
            job = self.state.jobs[runnable[self.cursor[name]][-1]]
            reason = misconfiguration.reason_for(self.state, job)
            if reason is None:
                return job
            if job.status_reason != reason:
                self.out.append(
                    ev.JobStatusReasonSet(at=self.now, job_id=job.job_id, reason=reason)
                )
            self.cursor[name] += 1
        return None

    # ---- placing ----------------------------------------------------------
    def try_place(self, name: str, job: Job, own_only: bool) -> bool:
        """Dispatch the share's head if the rules allow it, on a warm pool before cold hosts."""
        for pool in self.state.matching_pools(self.env, self.unit, job.warm_pool_key):
            if pool.job_id in self.consumed_pools or pool.count != job.count:
                continue
            if self._pool_fits(pool, name, own_only):
                self._dispatch_on_pool(name, job, pool)
                return True
            break  # the pool expiring first is the one to use; the others fit no better
        if not self.fits_cold(name, job.count, own_only):
            return False
        hosts = self.picker.take(self.env, self.unit, job.count)
        self._shift(name, job.count, 0)
        self.cursor[name] += 1
        self.out.append(
            ev.JobDispatched(
                at=self.now, job_id=job.job_id, attempt=job.attempt_no + 1, hosts=hosts
            )
        )
        return True

    def _move_pool(self, pool: WarmPool, to: str, sign: int) -> None:
        self.use[pool.share] -= sign * pool.count
        self.use[to] += sign * pool.count

    def _pool_fits(self, pool: WarmPool, name: str, own_only: bool) -> bool:
        # Taking a RESERVE share's pool must not leave its idle units without free hosts.
        shortfall = self.held_back(name) - self.physical_free()
        self._move_pool(pool, name, 1)
        try:
            reserve_kept = self.held_back(name) - self.physical_free() <= max(0, shortfall)
            return reserve_kept and self.within_limits(name, own_only)
        finally:
            self._move_pool(pool, name, -1)

    def _dispatch_on_pool(self, name: str, job: Job, pool: WarmPool) -> None:
        self.consumed_pools.add(pool.job_id)
        self._move_pool(pool, name, 1)
        self.cursor[name] += 1
        self.out.append(
            ev.JobDispatched(
                at=self.now,
                job_id=job.job_id,
                attempt=job.attempt_no + 1,
                hosts=pool.hosts,
                warm_pool=pool.job_id,
            )
        )
        self.out.append(
            ev.WarmPoolReused(
                at=self.now,
                job_id=pool.job_id,
                reused_by_job=job.job_id,
                billable_seconds=billable(pool, self.now),
            )
        )
        self.out.append(ev.WarmPoolInUse(at=self.now, job_id=job.job_id, from_job=pool.job_id))

    # ---- phases -----------------------------------------------------------
    def run(self) -> None:
        blocked = self.own_phase()
        blocked = self.borrow_phase(blocked)
        for name in sorted(blocked, key=self._ratio_key):
            self.make_room(name, blocked[name])

    def _ratio_key(self, name: str) -> tuple[float, str]:
        own = self.own(name)
        return (self.use[name] / own if own else float("inf"), name)

    def own_phase(self) -> dict[str, Job]:
        """Every share dispatches from its head within its own limit; lowest use/limit first."""
        blocked: dict[str, Job] = {}
        heap = [(*self._ratio_key(n), n) for n in self.shares]
        heapq.heapify(heap)
        while heap:
            *_, name = heapq.heappop(heap)
            job = self.head(name)
            if job is None:
                continue
            if self.try_place(name, job, own_only=True):
                heapq.heappush(heap, (*self._ratio_key(name), name))
            else:
                blocked[name] = job
        return blocked

    def borrow_phase(self, blocked: dict[str, Job]) -> dict[str, Job]:
        """Idle lendable capacity goes to borrowers' heads, oldest createdAt first."""
        heap = [
            (job.created_at, job.job_id, name)
            for name, job in blocked.items()
            if self.shares[name].strategy is SharingStrategy.LEND_AND_BORROW
        ]
        heapq.heapify(heap)
        while heap:
            _, _, name = heapq.heappop(heap)
            if not self.try_place(name, blocked[name], own_only=False):
                continue
            del blocked[name]
            nxt = self.head(name)
            if nxt is not None:
                blocked[name] = nxt
                heapq.heappush(heap, (nxt.created_at, nxt.job_id, name))
        return blocked

    def make_room(self, name: str, job: Job) -> None:
        """Free units for a blocked head: its share's pools, then reclaim, then in-share."""
        if self._waits_for_incoming(name, job):
            return
        own_pools = self._pools_of([name])
        if self._execute(name, job, self._plan(name, job, own_pools, []), "warm pool"):
            return
        if self.use[name] + job.count <= self.own(name):
            # Units already stopping no longer count as borrowed: they are on their way back.
            over = {n: self.use[n] - self.stopping[n] - self.own(n) for n in self.shares}
            over = {n: units for n, units in over.items() if units > 0 and n != name}
            plan = self._plan(name, job, self._pools_of(over), self._candidates(over), over)
            if self._execute(name, job, plan, f"capacity reclaimed by quota share {name}"):
                return
        if self.shares[name].in_share_preemption is ev.State.ENABLED:
            lower = [j for j in self._candidates([name]) if j.priority < job.priority]
            plan = self._plan(name, job, own_pools, lower)
            why = f"in-share preemption by higher-priority job {job.job_name} ({job.job_id})"
            self._execute(name, job, plan, why)

    # ---- making room ------------------------------------------------------
    def _waits_for_incoming(self, name: str, job: Job) -> bool:
        """Attempts already stopping will free enough: wait for them, preempt nothing more."""
        freed: Freed = []
        for share, units in self.incoming.items():
            if units <= 0:
                continue
            freed.append((share, units))
            if self.fits_after(name, job, freed):
                for promised, _ in freed:  # promised to this head; later heads look further
                    self.incoming[promised] = 0
                return True
        return False

    def _pools_of(self, names: Iterable[str]) -> list[WarmPool]:
        wanted = set(names)
        out = []
        for _, pid in self.state.available_pools[(self.env, self.unit)]:
            pool = self.state.pools[pid]
            if pool.queue == self.queue and pool.share in wanted and pid not in self.consumed_pools:
                out.append(pool)
        return out

    def _candidates(self, shares: Iterable[str]) -> list[Job]:
        jobs = []
        for share in shares:
            for *_, job_id in self.state.victims.get((self.queue, share, self.unit), ()):
                if job_id not in self.victimised:
                    jobs.append(self.state.jobs[job_id])
        jobs.sort(key=Job.victim_key)
        return jobs

    def _plan(
        self,
        name: str,
        job: Job,
        pools: list[WarmPool],
        victims: list[Job],
        excess: dict[str, int] | None = None,
    ) -> tuple[list[WarmPool], list[Job]] | None:
        """Fewest pools, then fewest victims, in order, whose units let the job run."""
        excess = dict(excess) if excess is not None else None
        freed: Freed = []
        chosen_pools: list[WarmPool] = []
        chosen: list[Job] = []
        items: list[WarmPool | Job] = [*pools, *victims]
        for item in items:
            share, units = item.share, item.count
            if excess is not None:
                if excess.get(share, 0) <= 0:
                    continue
                excess[share] -= units
            freed.append((share, units))
            if isinstance(item, WarmPool):
                chosen_pools.append(item)
            else:
                chosen.append(item)
            if self.fits_after(name, job, freed):
                break
        else:
            return None
        for victim in reversed(list(chosen)):  # drop victims that turn out unneeded
            rest = [(p.share, p.count) for p in chosen_pools]
            rest += [(v.share, v.count) for v in chosen if v is not victim]
            if self.fits_after(name, job, rest):
                chosen.remove(victim)
        return chosen_pools, chosen

    def _execute(
        self, name: str, job: Job, plan: tuple[list[WarmPool], list[Job]] | None, reason: str
    ) -> bool:
        if plan is None:
            return False
        pools, victims = plan
        for pool in pools:
            self.consumed_pools.add(pool.job_id)
            self._shift(pool.share, -pool.count, 0)
            self.picker.release(self.env, self.unit, pool.hosts)
            self.out.append(
                ev.WarmPoolTerminated(
                    at=self.now,
                    job_id=pool.job_id,
                    reason=ev.WarmPoolTerminationReason.CAPACITY_RECLAIMED,
                    billable_seconds=billable(pool, self.now),
                )
            )
        for victim in victims:
            self.victimised.add(victim.job_id)
            self.out.append(
                ev.JobPreemptionRequested(
                    at=self.now,
                    job_id=victim.job_id,
                    attempt=victim.attempt_no,
                    reason=f"Preempted: {reason}",
                    for_job=job.job_id,
                )
            )
        if not victims:
            return self.try_place(name, job, own_only=False)
        return True
