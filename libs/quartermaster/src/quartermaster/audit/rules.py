"""Which rule of spec section 4 made a recorded decision, with the inputs it saw.

Read from the decision and the folded state just before it: a dispatch within
the share's own limit is own quota, beyond it borrowing; a preemption's recorded
reason names reclaim or in-share preemption. For a preemption the candidates
are listed in the core's victim order (`Job.victim_key`: lowest priority first,
then the most recently started), so an auditor sees why this job and not another.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from quartermaster import events as ev
from quartermaster.core import State
from quartermaster.core.model import Job


class Rule(msgspec.Struct, frozen=True):
    name: str  # e.g. OWN_QUOTA, BORROW, RECLAIM, IN_SHARE_PREEMPTION, RETRY
    reason: str  # what the decision itself says
    inputs: dict[str, str]


class Candidate(msgspec.Struct, frozen=True):
    """A job the preemption rule could have taken, in the rule's order."""

    job_id: str
    job_name: str
    share: str
    priority: int
    dispatched_at: float
    chosen: bool
    why: str


def _share_inputs(state: State, job: Job, prefix: str) -> dict[str, str]:
    share = state.shares.get((job.queue, job.share))
    key = state.share_key(job)
    inputs = {
        f"{prefix}share": job.share,
        f"{prefix}in_use": str(state.use.get(key, 0)),
        f"{prefix}limit": str(share.own(job.unit) if share else 0),
    }
    if share is not None:
        inputs[f"{prefix}strategy"] = share.strategy.value
    return inputs


def rule_of(state: State, decision: ev.Event) -> Rule | None:
    """The rule behind `decision`, judged on the state just before it was folded."""
    job = state.jobs.get(getattr(decision, "job_id", ""))
    match decision:
        case ev.JobDispatched() if job is not None:
            return _dispatch_rule(state, decision, job)
        case ev.JobPreemptionRequested() if job is not None:
            target = state.jobs.get(decision.for_job)
            inputs = {**_share_inputs(state, job, "victim_"), "victim_priority": str(job.priority)}
            if target is not None:
                inputs |= _share_inputs(state, target, "for_")
                inputs["for_priority"] = str(target.priority)
            name = "PREEMPTION"
            if "capacity reclaimed" in decision.reason:
                name = "RECLAIM"
            elif "in-share preemption" in decision.reason:
                name = "IN_SHARE_PREEMPTION"
            return Rule(name, decision.reason, inputs)
        case ev.JobTimedOut() if job is not None:
            inputs = {
                "timeout_seconds": str(job.timeout_seconds),
                "running_at": str(job.running_at),
            }
            return Rule("TIMEOUT", decision.reason, inputs)
        case ev.JobRetried() if job is not None:
            inputs = {"attempt": str(decision.attempt), "attempts": str(job.retry_attempts)}
            return Rule("RETRY", decision.reason, inputs)
        case ev.JobFinallyFailed() if job is not None:
            inputs = {"attempts_used": str(job.attempts_used), "attempts": str(job.retry_attempts)}
            return Rule("FINAL_FAILURE", decision.reason, inputs)
        case ev.JobStatusReasonSet():
            name = "MISCONFIGURATION" if decision.reason.startswith("MISCONFIG") else "WAITING"
            return Rule(name, decision.reason, {})
        case ev.WarmPoolAvailable():
            inputs = {"expires_at": str(decision.expires_at), "hosts": ",".join(decision.hosts)}
            return Rule("POOL_KEPT", "hosts kept warm", inputs)
        case ev.WarmPoolTerminated():
            inputs = {"billable_seconds": str(decision.billable_seconds)}
            return Rule(f"POOL_{decision.reason.value}", decision.reason.value, inputs)
        case ev.WarmPoolReused():
            return Rule("POOL_REUSED", f"reused by {decision.reused_by_job}", {})
        case ev.WarmPoolInUse():
            return Rule("POOL_IN_USE", f"runs on the pool of {decision.from_job}", {})
    return None


def _dispatch_rule(state: State, decision: ev.JobDispatched, job: Job) -> Rule:
    inputs = {**_share_inputs(state, job, ""), "count": str(job.count), "unit": job.unit}
    share = state.shares.get((job.queue, job.share))
    if decision.warm_pool is not None:
        inputs["warm_pool"] = decision.warm_pool
        return Rule("WARM_POOL_REUSE", f"matching warm pool of {decision.warm_pool}", inputs)
    in_use = state.use.get(state.share_key(job), 0)
    own = share.own(job.unit) if share is not None else 0
    if in_use + job.count <= own:
        return Rule(
            "OWN_QUOTA", f"fits the share's own limit ({in_use}+{job.count}<={own})", inputs
        )
    cap = share.cap(job.unit) if share is not None else None
    inputs["borrow_limit"] = str(share.borrow_limit if share is not None else -1)
    inputs["cap"] = "unlimited" if cap is None else str(cap)
    return Rule("BORROW", f"borrows idle lendable capacity ({in_use}+{job.count}>{own})", inputs)


def preemption_candidates(
    state: State, preemption: ev.JobPreemptionRequested, batch: Sequence[ev.Event]
) -> list[Candidate]:
    """The jobs the rule ranked for `preemption.for_job`, on the pass's state (before `batch`)."""
    victim = state.jobs.get(preemption.job_id)
    target = state.jobs.get(preemption.for_job)
    if victim is None or target is None:
        return []
    chosen = {
        d.job_id
        for d in batch
        if isinstance(d, ev.JobPreemptionRequested) and d.for_job == preemption.for_job
    }
    in_share = victim.share == target.share
    pool: list[tuple[Job, str | None]] = []  # (job, why it is not eligible)
    for name in sorted(n for (q, n) in state.shares if q == target.queue):
        key = (target.queue, name, target.unit)
        share = state.shares[(target.queue, name)]
        over = state.use.get(key, 0) - state.stopping.get(key, 0) - share.own(target.unit)
        for *_, job_id in state.victims.get(key, ()):
            job = state.jobs[job_id]
            if in_share:
                if name != target.share:
                    continue
                why = None
                if job.priority >= target.priority:
                    why = f"priority {job.priority} is not below {target.job_name}'s"
            elif name == target.share:
                continue  # reclaim takes from other shares only
            else:
                why = None if over > 0 else f"{name} holds no borrowed units"
            pool.append((job, why))
    pool.sort(key=lambda item: item[0].victim_key())
    taken = [job for job, _ in pool if job.job_id in chosen]
    return [_candidate(job, why, taken) for job, why in pool]


def _candidate(job: Job, why_not: str | None, taken: list[Job]) -> Candidate:
    chosen = any(t.job_id == job.job_id for t in taken)
    if chosen:
        why = "taken: lowest priority first, then the most recently started"
    elif why_not is not None:
        why = why_not
    elif taken and job.victim_key() > taken[-1].victim_key():
        last = taken[-1]
        if job.priority > last.priority:
            why = f"priority {job.priority} is above {last.job_name}'s {last.priority}"
        else:
            why = f"started before {last.job_name} (the most recently started goes first)"
    else:
        why = "not needed: the jobs taken free enough units"
    return Candidate(
        job.job_id, job.job_name, job.share, job.priority, job.dispatched_at, chosen, why
    )
