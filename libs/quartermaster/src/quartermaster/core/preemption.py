"""Who is preempted, and why (spec section 4, steps 4-7).

One ordering decides which running job goes first, one choice takes the fewest
pools and victims whose units let the waiting job run, and every preemption
names its rule and inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from quartermaster import events as ev
from quartermaster.core.model import Job, Share, WarmPool
from quartermaster.events import Rule, SharingStrategy

Freed = list[tuple[str, int]]  # (share, units) a plan would free
Plan = tuple[list[WarmPool], list[Job]]  # pools to terminate, then jobs to preempt


def saved_at(job: Job) -> float:
    """Up to when the attempt's work survives a stop: its newest checkpoint, else its
    dispatch (the fold keeps a checkpoint only when it is later than the dispatch)."""
    saved = job.last_checkpoint_at
    return job.dispatched_at if saved is None else saved


def seconds_at_risk(job: Job, now: float) -> float:
    """The work a stop at `now` throws away: seconds since `saved_at` (the hosts' time
    since the dispatch, start-up included, when the attempt never checkpointed)."""
    return max(0.0, now - saved_at(job))


def victim_order(job: Job) -> tuple[int, float, str]:
    """The preemption order of running jobs: the first is the one to stop first.

    The pass's time is the same for every candidate, so "least work at risk first"
    is "latest `saved_at` first", a key that does not move with the clock (the fold
    keeps it in `State.victims`). With no checkpoints it is the dispatch time: the
    most recently started first, as before checkpoints were reported.
    """
    return (
        # 1. Lowest schedulingPriority first: the least important work goes.
        job.priority,
        # 2. Then the least work at risk: the latest checkpoint, or without one the
        #    most recently started attempt, loses the fewest seconds.
        -saved_at(job),
        # 3. Then by job id, so the order is total and a replay finds the same victim.
        job.job_id,
    )


def in_share_victims(candidates: Sequence[Job], job: Job) -> list[Job]:
    """In-share preemption takes only jobs of strictly lower priority than `job`."""
    return [victim for victim in candidates if victim.priority < job.priority]


def choose(
    pools: Sequence[WarmPool],
    victims: Sequence[Job],
    fits: Callable[[Freed], bool],
    budget: dict[str, int] | None = None,
) -> Plan | None:
    """Fewest pools, then fewest victims (each list in order), whose units let the job run.

    `fits(freed)` says whether the job runs once those units are free. `budget`
    caps what each share may give (the units it holds above its limit); None: no cap.
    Victims that turn out unneeded once later ones are taken are dropped again.
    Never a plan that does not let the job run: None then.
    """
    left = dict(budget) if budget is not None else None
    freed: Freed = []
    chosen_pools: list[WarmPool] = []
    chosen: list[Job] = []
    items: list[WarmPool | Job] = [*pools, *victims]
    for item in items:
        if left is not None:
            if left.get(item.share, 0) <= 0:
                continue
            left[item.share] -= item.count
        freed.append((item.share, item.count))
        if isinstance(item, WarmPool):
            chosen_pools.append(item)
        else:
            chosen.append(item)
        if fits(freed):
            break
    else:
        return None
    for victim in reversed(list(chosen)):
        rest = [(p.share, p.count) for p in chosen_pools]
        rest += [(v.share, v.count) for v in chosen if v is not victim]
        if fits(rest):
            chosen.remove(victim)
    return chosen_pools, chosen


def reclaim_rule(victim_share: Share, unit: str, held: int) -> Rule:
    """Taking units back from a share above its limit: RECLAIM while it borrows within
    its borrowLimit, LIMIT_LOWERED when it holds more than it may (its limit was lowered)."""
    if victim_share.strategy is SharingStrategy.LEND_AND_BORROW:
        cap = victim_share.cap(unit)
        if cap is None or held <= cap:
            return Rule.RECLAIM
    return Rule.LIMIT_LOWERED


def request(
    victim: Job,
    job: Job,
    at: float,
    rule: Rule,
    *,
    lender_share: str | None = None,
    units_borrowed: int | None = None,
) -> ev.JobPreemptionRequested:
    """The decision to stop `victim` for `job`, with its rule, inputs and reason text;
    `at` is the pass's time, which the victim's seconds at risk are counted to."""
    if rule is Rule.IN_SHARE:
        text = f"in-share preemption by higher-priority job {job.job_name} ({job.job_id})"
        gap: int | None = job.priority - victim.priority
    elif rule is Rule.LIMIT_LOWERED:
        text = (
            f"capacity reclaimed by quota share {lender_share}: quota share "
            f"{victim.share} holds more than its lowered limit"
        )
        gap = None
    else:
        text = f"capacity reclaimed by quota share {lender_share}"
        gap = None
    return ev.JobPreemptionRequested(
        at=at,
        job_id=victim.job_id,
        attempt=victim.attempt_no,
        reason=f"Preempted: {text}",
        for_job=job.job_id,
        rule=rule,
        lender_share=lender_share,
        units_borrowed=units_borrowed,
        priority_gap=gap,
        seconds_at_risk=seconds_at_risk(victim, at),
    )
