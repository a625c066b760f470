"""Spec invariants (section 4), checked from the entities with independent arithmetic.

Nothing here reuses the pass's own capacity code: a bug there cannot hide
itself by being checked with the same formula.
"""

from __future__ import annotations

from collections import Counter

import msgspec

from quartermaster.core import State
from quartermaster.core.misconfiguration import reason_for
from quartermaster.core.model import ACTIVE_STATUSES, HostStatus, JobStatus, WarmPoolStatus
from quartermaster.events import SharingStrategy


class InvariantViolation(AssertionError):
    pass


def _fail(msg: str) -> None:
    raise InvariantViolation(msg)


def usage_by_share(state: State) -> Counter[tuple[str, str, str]]:
    """Units held per (queue, share, unit), recomputed from jobs and pools."""
    use: Counter[tuple[str, str, str]] = Counter()
    for job in state.jobs.values():
        if job.hosts:
            use[(job.queue, job.share, job.unit)] += job.count
    for pool in state.pools.values():
        if pool.status is WarmPoolStatus.AVAILABLE:
            use[(pool.queue, pool.share, pool.unit)] += pool.count
    return use


def check_allocation(state: State) -> None:
    """No unit given twice; the derived indexes agree with the entities."""
    holders: dict[str, str] = {}
    for job in state.jobs.values():
        for host in job.hosts:
            if host in holders:
                _fail(f"host {host} held by {holders[host]} and job {job.job_id}")
            holders[host] = job.job_id
            if state.hosts[host].holder != job.job_id:
                _fail(f"host {host} does not know it runs {job.job_id}")
        if job.hosts and len(job.hosts) != job.count:
            _fail(f"job {job.job_id} holds {len(job.hosts)} hosts, needs {job.count}")
        if job.status in ACTIVE_STATUSES and not job.hosts:
            _fail(f"job {job.job_id} is {job.status} without hosts")
    for pool in state.pools.values():
        if pool.status is not WarmPoolStatus.AVAILABLE:
            continue
        for host in pool.hosts:
            if host in holders:
                _fail(f"host {host} in pool {pool.job_id} and held by {holders[host]}")
            holders[host] = pool.job_id
    for entry in state.hosts.values():
        if entry.holder is not None and entry.holder not in holders.values():
            _fail(f"host {entry.host_id} names holder {entry.holder} that does not hold it")
        free = entry.host_id in state._free_list(entry)
        should = entry.holder is None and entry.status is HostStatus.HEALTHY
        if free != should:
            _fail(f"host {entry.host_id} free-list membership {free}, expected {should}")
    use = usage_by_share(state)
    for key, units in state.use.items():
        if units != use.get(key, 0):
            _fail(f"use index {key}={units}, recomputed {use.get(key, 0)}")
    stopping: Counter[tuple[str, str, str]] = Counter()
    for job in state.jobs.values():
        if job.stop_cause is not None and len(job.ended_hosts) < len(job.hosts):
            stopping[(job.queue, job.share, job.unit)] += job.count
    for key, units in state.stopping.items():
        if units != stopping.get(key, 0):
            _fail(f"stopping index {key}={units}, recomputed {stopping.get(key, 0)}")
    env_use: Counter[tuple[str, str]] = Counter()
    for (queue, _, unit), units in use.items():
        env_use[(state.queues[queue].environment, unit)] += units
    for (env, unit), units in env_use.items():
        maximum = state.environments[env].max_capacity.get(unit, 0)
        if units > maximum:
            _fail(f"environment {env} uses {units} {unit} > maxCapacity {maximum}")
    for job in state.jobs.values():
        runnable = job.status is JobStatus.RUNNABLE and not job.awaiting_outcome
        queued = (*job.order_key(), job.job_id) in state.runnable[(job.queue, job.share, job.unit)]
        if runnable != queued:
            _fail(f"job {job.job_id} runnable={runnable} but queued={queued}")


def check_limits(state: State, exempt: set[tuple[str, str]]) -> None:
    """RESERVE/LEND stay within their limit; LEND_AND_BORROW within limit x (1+borrowLimit%)."""
    use = usage_by_share(state)
    for (queue, name, unit), units in use.items():
        if (queue, name) in exempt:
            continue
        share = state.shares.get((queue, name))
        if share is None:
            continue
        cap = share.cap(unit)
        if cap is not None and units > cap:
            _fail(f"share {name} ({share.strategy}) holds {units} {unit} > {cap}")


def could_run_now(state: State, queue: str, share_name: str, unit: str, count: int) -> bool:
    """Spec section 3, written out plainly: may `count` cold units go to this share now?"""
    env = state.queues[queue].environment
    shares = [s for (q, _), s in state.shares.items() if q == queue]
    use = usage_by_share(state)
    used = {s.name: use.get((queue, s.name, unit), 0) for s in shares}
    own = {s.name: s.own(unit) for s in shares}
    env_used = _env_used(use, state, env, unit)
    physical = physical_free(state, env, unit)
    idle = {n: max(0, own[n] - used[n]) for n in own}
    strategy = {s.name: s.strategy for s in shares}
    held_back = sum(
        idle[n] for n in idle if strategy[n] is SharingStrategy.RESERVE and n != share_name
    )
    if count > physical - held_back:
        return False
    if used[share_name] + count <= own[share_name]:
        return True
    share = state.shares[(queue, share_name)]
    if share.strategy is not SharingStrategy.LEND_AND_BORROW:
        return False
    cap = share.cap(unit)
    if cap is not None and used[share_name] + count > cap:
        return False
    capacity = env_used + physical
    unassigned = max(0, capacity - sum(own.values()))
    lendable = sum(
        idle[n] for n in idle if strategy[n] is not SharingStrategy.RESERVE and n != share_name
    )
    borrowed = sum(max(0, used[n] - own[n]) for n in used)
    own_part = max(0, min(count, own[share_name] - used[share_name]))
    return borrowed + (count - own_part) <= lendable + unassigned


def check_work_conservation(state: State) -> None:
    """After a settled pass no head that the rules let run waits while capacity sits idle."""
    for (queue, share, unit), runnable in state.runnable.items():
        q = state.queues.get(queue)
        if not runnable or q is None or (queue, share) not in state.shares:
            continue
        if state.environments[q.environment].state != "ENABLED":
            continue
        for *_, job_id in runnable:
            job = state.jobs[job_id]
            if reason_for(state, job) is not None:
                continue
            if could_run_now(state, queue, share, unit, job.count):
                _fail(f"head {job_id} of {share} could run now but waits")
            break


def snapshot(state: State) -> bytes:
    """A canonical encoding of the entities, to compare a replay with the original."""
    return msgspec.json.encode(
        {
            "jobs": dict(sorted(state.jobs.items())),
            "hosts": dict(sorted(state.hosts.items())),
            "pools": dict(sorted(state.pools.items())),
            "use": {f"{k}": v for k, v in sorted(state.use.items()) if v},
        }
    )


def _env_used(use: Counter[tuple[str, str, str]], state: State, env: str, unit: str) -> int:
    return sum(
        u for (q, _, un), u in use.items() if un == unit and state.queues[q].environment == env
    )


def physical_free(state: State, env: str, unit: str) -> int:
    """Units the environment could still take: free healthy hosts, capped by maxCapacity."""
    env_used = _env_used(usage_by_share(state), state, env, unit)
    free_hosts = sum(
        1
        for h in state.hosts.values()
        if h.unit == unit
        and h.holder is None
        and h.status is HostStatus.HEALTHY
        and h.environment in (None, env)
    )
    maximum = state.environments[env].max_capacity.get(unit, 0)
    return max(0, min(maximum - env_used, free_hosts))


def reserve_shortfall(state: State) -> dict[tuple[str, str], int]:
    """Per (queue, unit): RESERVE shares' idle units that have no free host behind them."""
    use = usage_by_share(state)
    out: dict[tuple[str, str], int] = {}
    for queue_name, queue in state.queues.items():
        if queue.environment not in state.environments:
            continue
        for unit in state.environments[queue.environment].max_capacity:
            reserved = sum(
                max(0, s.own(unit) - use.get((queue_name, s.name, unit), 0))
                for (q, _), s in state.shares.items()
                if q == queue_name and s.strategy is SharingStrategy.RESERVE
            )
            out[(queue_name, unit)] = reserved - physical_free(state, queue.environment, unit)
    return out


def check_reserve_respected(
    state: State,
    dispatched_to: set[tuple[str, str, str]],
    shortfall_before: dict[tuple[str, str], int],
) -> None:
    """Dispatches to non-RESERVE shares never eat into RESERVE shares' idle units.

    Relative to before the batch: host loss may already have left a shortfall,
    which a dispatch must not deepen.
    """
    after = reserve_shortfall(state)
    for queue, share_name, unit in dispatched_to:
        share = state.shares.get((queue, share_name))
        if share is None or share.strategy is SharingStrategy.RESERVE:
            continue
        if after[(queue, unit)] > max(0, shortfall_before.get((queue, unit), 0)):
            _fail(f"a dispatch to {share_name} took units held back for RESERVE shares")
