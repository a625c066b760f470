"""Which rule made a recorded decision, with the inputs it judged.

Decisions carry their rule (`events.Rule`) and its inputs; older records are
upcast on decode where their text names the rule. A dispatch recorded before
dispatches carried theirs is judged here from the state just before it: within
the share's own limit is OWN_QUOTA, beyond it BORROWED. To the recorded inputs
this adds the shares' usage the decision found. For a preemption the candidates
are listed in the core's victim order (`core.preemption.victim_order`), each with
the seconds of work a stop would lose, so an auditor sees why this job and not another.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from quartermaster import events as ev
from quartermaster.core import State
from quartermaster.core.model import Job
from quartermaster.core.preemption import seconds_at_risk, victim_order
from quartermaster.events import Rule
from quartermaster.events.upcast import REASON_FIELDS


class RuleInfo(msgspec.Struct, frozen=True):
    name: str  # an `events.Rule` value
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
    # The work a stop at the decision's time would lose: seconds since the candidate's
    # last checkpoint, or its dispatch (`core.preemption.seconds_at_risk`).
    seconds_at_risk: float | None = None


_NOT_INPUTS = frozenset({"rule", "for_job"})  # shown on their own


def _recorded_inputs(decision: ev.Event) -> dict[str, str]:
    """The reason fields the decision recorded (None: not recorded)."""
    return {
        name: str(value)
        for name in decision.__struct_fields__
        if name in REASON_FIELDS
        and name not in _NOT_INPUTS
        and (value := getattr(decision, name)) is not None
    }


def _share_inputs(state: State, job: Job, prefix: str) -> dict[str, str]:
    share = state.shares.get((job.queue, job.share))
    inputs = {
        f"{prefix}share": job.share,
        f"{prefix}in_use": str(state.use.get(state.share_key(job), 0)),
        f"{prefix}limit": str(share.own(job.unit) if share else 0),
    }
    if share is not None:
        inputs[f"{prefix}strategy"] = share.strategy.value
    return inputs


def _reason_text(decision: ev.Event, inputs: dict[str, str]) -> str:
    match decision:
        case ev.JobDispatched() if decision.warm_pool is not None:
            return f"runs on the matching warm pool of {decision.warm_pool}"
        case ev.JobDispatched():
            return (
                f"quota share {inputs['share']} holds {inputs['share_units']} {inputs['unit']} "
                f"with it; its own limit is {inputs['share_limit']}"
            )
        case ev.WarmPoolAvailable():
            return "hosts kept warm"
        case ev.WarmPoolReused():
            return f"reused by {decision.reused_by_job}"
        case ev.WarmPoolInUse():
            return f"runs on the pool of {decision.from_job}"
        case ev.WarmPoolTerminated():
            return decision.reason.value
    return str(getattr(decision, "reason", ""))


def rule_of(state: State, decision: ev.Event) -> RuleInfo | None:
    """The rule behind `decision`, with its inputs, on the state just before it was folded."""
    job = state.jobs.get(getattr(decision, "job_id", ""))
    if job is None:
        return None
    recorded = getattr(decision, "rule", None)
    inputs = _recorded_inputs(decision)
    if isinstance(decision, ev.JobDispatched):
        if decision.share_units is None:  # recorded before dispatches carried their inputs
            held = state.use.get(state.share_key(job), 0) + job.count
            share = state.shares.get((job.queue, job.share))
            inputs["share_units"] = str(held)
            inputs["share_limit"] = str(share.own(job.unit) if share is not None else 0)
        inputs |= {"share": job.share, "count": str(job.count), "unit": job.unit}
        if recorded is None:
            recorded = _dispatch_rule(state, decision, job)
    elif isinstance(decision, ev.JobPreemptionRequested):
        inputs |= _share_inputs(state, job, "victim_") | {"victim_priority": str(job.priority)}
        target = state.jobs.get(decision.for_job)
        if target is not None:
            inputs |= _share_inputs(state, target, "for_") | {"for_priority": str(target.priority)}
    if recorded is None:
        return None
    return RuleInfo(str(recorded), _reason_text(decision, inputs), inputs)


def _dispatch_rule(state: State, decision: ev.JobDispatched, job: Job) -> Rule:
    """For dispatches recorded without their rule: what it was on the state before it."""
    if decision.warm_pool is not None:
        return Rule.POOL_MATCH
    share = state.shares.get((job.queue, job.share))
    own = share.own(job.unit) if share is not None else 0
    held = state.use.get(state.share_key(job), 0) + job.count
    return Rule.OWN_QUOTA if held <= own else Rule.BORROWED


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
                why = None if over > 0 else f"{name} holds no units above its limit"
            pool.append((job, why))
    pool.sort(key=lambda item: victim_order(item[0]))
    taken = [job for job, _ in pool if job.job_id in chosen]
    checkpointed = any(job.last_checkpoint_at is not None for job, _ in pool)
    at = preemption.at  # the pass's time: what its seconds at risk were counted to
    return [_candidate(job, why, taken, at, checkpointed) for job, why in pool]


def _candidate(
    job: Job, why_not: str | None, taken: list[Job], at: float, checkpointed: bool
) -> Candidate:
    """`checkpointed`: some candidate reported a checkpoint, so the order among equal
    priorities is by work at risk (without any, that is the most recently started)."""
    chosen = any(t.job_id == job.job_id for t in taken)
    risk = seconds_at_risk(job, at)
    if chosen and checkpointed:
        why = "taken: lowest priority first, then the least work at risk"
    elif chosen:
        why = "taken: lowest priority first, then the most recently started"
    elif why_not is not None:
        why = why_not
    elif taken and victim_order(job) > victim_order(taken[-1]):
        last = taken[-1]
        if job.priority > last.priority:
            why = f"priority {job.priority} is above {last.job_name}'s {last.priority}"
        elif checkpointed:
            why = (
                f"{risk:.0f} s of work at risk, more than {last.job_name}'s "
                f"{seconds_at_risk(last, at):.0f} s (the least work at risk goes first)"
            )
        else:
            why = f"started before {last.job_name} (the most recently started goes first)"
    else:
        why = "not needed: the jobs taken free enough units"
    return Candidate(
        job.job_id, job.job_name, job.share, job.priority, job.dispatched_at, chosen, why, risk
    )
