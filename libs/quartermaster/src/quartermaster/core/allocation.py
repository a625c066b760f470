"""The allocation step of a pass for one (job queue, capacity unit): spec section 4.

Works on the capacity overlay (`capacity.CapacityView`) plus queue cursors and
consumed pools, so that it hands out many units in one pass without mutating
the state. Phases: own quota, borrowing (FIFO), then making room for blocked
heads (terminating warm pools, reclaiming from borrowers, in-share preemption).
Given an `explain` dict it also records why each blocked head waits.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from quartermaster import events as ev
from quartermaster.core import misconfiguration, preemption, wait_reasons, warm_pools
from quartermaster.core.capacity import CapacityView
from quartermaster.core.hosts_picker import HostPicker
from quartermaster.core.model import Job, WarmPool
from quartermaster.core.preemption import Freed, Plan
from quartermaster.core.state import State
from quartermaster.core.wait_reasons import WaitReason
from quartermaster.events import Rule, SharingStrategy


class UnitPass(CapacityView):
    def __init__(
        self,
        state: State,
        queue: str,
        unit: str,
        picker: HostPicker,
        out: list[ev.Event],
        explain: dict[str, WaitReason] | None = None,
    ) -> None:
        super().__init__(state, queue, unit, picker)
        self.out = out
        self.now = state.now
        self.explain = explain  # share -> why its head waits, when asked for
        self.cursor = dict.fromkeys(self.shares, 0)
        self.consumed_pools: set[str] = set()
        self.victimised: set[str] = set()
        # Units held by attempts whose stop is pending: free soon, promised once.
        self.stopping = {n: state.stopping[(queue, n, unit)] for n in self.shares}
        self.incoming = dict(self.stopping)
        # Most unit passes have nothing stopping and no warm pool to offer: asked per
        # head, so answered once (the state does not change during a pass).
        self._any_incoming = any(units > 0 for units in self.incoming.values())
        self._any_pools = bool(state.available_pools.get((self.env, unit)))
        # Whether a job misfits depends only on its share and size here: asked once each.
        self._misfits: dict[tuple[str, int], misconfiguration.Misfit | None] = {}

    # ---- queue heads ------------------------------------------------------
    def head(self, name: str) -> Job | None:
        """The share's next job in dispatch order, skipping (and labelling) misfits."""
        runnable = self.state.runnable.get((self.queue, name, self.unit))
        if not runnable:
            return None
        while self.cursor[name] < len(runnable):
            job = self.state.jobs[runnable[self.cursor[name]][-1]]
            size = (name, job.count)
            if size not in self._misfits:
                self._misfits[size] = misconfiguration.misfit(self.state, job)
            found = self._misfits[size]
            if found is None:
                return job
            if job.status_reason != found.text:
                self.out.append(
                    ev.JobStatusReasonSet(
                        at=self.now,
                        job_id=job.job_id,
                        reason=found.text,
                        instances_needed=found.needed,
                        instances_allowed=found.allowed,
                    )
                )
            self.cursor[name] += 1
        return None

    # ---- placing ----------------------------------------------------------
    def try_place(self, name: str, job: Job, own_only: bool) -> bool:
        """Dispatch the share's head if the rules allow it, on a warm pool before cold hosts."""
        for pool in warm_pools.matching(self.state, self.env, job) if self._any_pools else ():
            if pool.job_id in self.consumed_pools:
                continue
            if self._pool_fits(pool, name, own_only):
                self._dispatch_on_pool(name, job, pool)
                return True
            break  # the pool expiring first is the one to use; the others fit no better
        if not self.fits_cold(name, job.count, own_only):
            return False
        hosts = self.picker.take(self.env, self.unit, job.count)
        self.shift(name, job.count, 0)
        self.cursor[name] += 1
        self.out.append(self._dispatch(name, job, hosts, None))
        return True

    def _dispatch(
        self, name: str, job: Job, hosts: tuple[str, ...], pool: str | None
    ) -> ev.JobDispatched:
        """The decision, once the job's units are in its share's use."""
        held, own = self.use[name], self.own(name)
        return ev.JobDispatched(
            at=self.now,
            job_id=job.job_id,
            attempt=job.attempt_no + 1,
            hosts=hosts,
            warm_pool=pool,
            rule=Rule.OWN_QUOTA if held <= own else Rule.BORROWED,
            share_units=held,
            share_limit=own,
        )

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
        self.out.append(self._dispatch(name, job, pool.hosts, pool.job_id))
        self.out.append(
            ev.WarmPoolReused(
                at=self.now,
                job_id=pool.job_id,
                reused_by_job=job.job_id,
                billable_seconds=warm_pools.billable(pool, self.now),
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
        if self._execute(name, job, self._plan(name, job, own_pools, []), {}):
            return
        if self.use[name] + job.count <= self.own(name):
            # Units already stopping no longer count as borrowed: they are on their way back.
            over = {n: self.use[n] - self.stopping[n] - self.own(n) for n in self.shares}
            over = {n: units for n, units in over.items() if units > 0 and n != name}
            plan = self._plan(name, job, self._pools_of(over), self._candidates(over), over)
            if self._execute(name, job, plan, over):
                return
        if self.shares[name].in_share_preemption is ev.State.ENABLED:
            lower = preemption.in_share_victims(self._candidates([name]), job)
            if self._execute(name, job, self._plan(name, job, own_pools, lower), None):
                return
        if self.explain is not None:
            self.explain[name] = wait_reasons.blocked(self, name, job)

    # ---- making room ------------------------------------------------------
    def _waits_for_incoming(self, name: str, job: Job) -> bool:
        """Attempts already stopping will free enough: wait for them, preempt nothing more."""
        if not self._any_incoming:
            return False
        freed: Freed = []
        for share, units in self.incoming.items():
            if units <= 0:
                continue
            freed.append((share, units))
            if self.fits_after(name, job.count, freed):
                for promised, _ in freed:  # promised to this head; later heads look further
                    self.incoming[promised] = 0
                if self.explain is not None:
                    self.explain[name] = wait_reasons.waiting_for_stop(
                        job,
                        sum(units for _, units in freed),
                        self._stopping_jobs({share for share, _ in freed}),
                        self.unit,
                    )
                return True
        return False

    def _stopping_jobs(self, shares: set[str]) -> list[Job]:
        """Jobs of these shares whose stop is pending (for explanations only)."""
        found: dict[str, Job] = {}
        for host in self.state.hosts.values():
            job = self.state.jobs.get(host.holder) if host.holder else None
            if (
                job is not None
                and job.stop_cause is not None
                and job.queue == self.queue
                and job.unit == self.unit
                and job.share in shares
            ):
                found[job.job_id] = job
        return [found[j] for j in sorted(found)]

    def _pools_of(self, names: Iterable[str]) -> list[WarmPool]:
        if not self._any_pools:
            return []
        wanted = set(names)
        out = []
        for _, pid in self.state.available_pools[(self.env, self.unit)]:
            pool = self.state.pools[pid]
            if pool.queue == self.queue and pool.share in wanted and pid not in self.consumed_pools:
                out.append(pool)
        return out

    def _candidates(self, shares: Iterable[str]) -> list[Job]:
        """Running jobs of these shares, in `preemption.victim_order`: the index holds
        each job's order key (it ends with the job id), so the keys are sorted, not the jobs."""
        victims, taken = self.state.victims, self.victimised
        entries = [
            entry
            for share in shares
            for entry in victims.get((self.queue, share, self.unit), ())
            if entry[-1] not in taken
        ]
        entries.sort()  # one share's are sorted already: a single run
        jobs = self.state.jobs
        return [jobs[entry[-1]] for entry in entries]

    def _plan(
        self,
        name: str,
        job: Job,
        pools: list[WarmPool],
        victims: list[Job],
        excess: dict[str, int] | None = None,
    ) -> Plan | None:
        if not pools and not victims:  # nothing to free: no plan (as `choose` would say)
            return None
        return preemption.choose(
            pools, victims, lambda freed: self.fits_after(name, job.count, freed), excess
        )

    def _execute(self, name: str, job: Job, plan: Plan | None, over: dict[str, int] | None) -> bool:
        """Carry out a plan: evict its pools, ask its victims to stop, or place the job.

        `over` is what each share holds above its limit (a reclaim); None: in-share.
        """
        if plan is None:
            return False
        pools, victims = plan
        for pool in pools:
            self.consumed_pools.add(pool.job_id)
            self.shift(pool.share, -pool.count, 0)
            self.picker.release(self.env, self.unit, pool.hosts)
            self.out.append(
                ev.WarmPoolTerminated(
                    at=self.now,
                    job_id=pool.job_id,
                    reason=ev.WarmPoolTerminationReason.CAPACITY_RECLAIMED,
                    billable_seconds=warm_pools.billable(pool, self.now),
                    rule=Rule.POOL_EVICTED,
                    for_job=job.job_id,
                )
            )
        for victim in victims:
            self.victimised.add(victim.job_id)
            if over is None:
                self.out.append(preemption.request(victim, job, self.now, Rule.IN_SHARE))
                continue
            share = self.shares[victim.share]
            rule = preemption.reclaim_rule(share, self.unit, self.use[victim.share])
            self.out.append(
                preemption.request(
                    victim,
                    job,
                    self.now,
                    rule,
                    lender_share=name,
                    units_borrowed=over[victim.share],
                )
            )
        if not victims:
            return self.try_place(name, job, own_only=False)
        if self.explain is not None:
            units = sum(v.count for v in victims)
            self.explain[name] = wait_reasons.waiting_for_stop(job, units, victims, self.unit)
        return True
