"""Dry run of a submission: what the pass would do with the job now, changing nothing.

The would-be `JobSubmitted` is folded into a fork of the state and the pass is
run to its fixpoint there, exactly as the scheduler would: the job starts (on
which hosts, on a warm pool or cold), or others are preempted or pools evicted
for it, or it waits, and then why.
"""

from __future__ import annotations

import msgspec

from quartermaster import events as ev
from quartermaster.core.decide import DEFAULT_POLICY, PassPolicy, settle
from quartermaster.core.fold import fold
from quartermaster.core.fork import fork, seal
from quartermaster.core.state import State
from quartermaster.core.wait_reasons import WaitReason
from quartermaster.core.waiting import why_waiting


class DryRun(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    starts: bool
    hosts: tuple[str, ...] = ()
    warm_pool: str | None = None  # the job whose Available pool it takes; None: cold hosts
    rule: ev.Rule | None = None  # OWN_QUOTA or BORROWED when it starts
    preempts: tuple[str, ...] = ()  # jobs asked to stop for it
    evicts: tuple[str, ...] = ()  # warm pools terminated to free units for it
    wait: WaitReason | None = None  # why it waits, when it does not start


def dry_run(
    state: State, submission: ev.JobSubmitted, policy: PassPolicy = DEFAULT_POLICY
) -> DryRun:
    """Pure: `state` is left exactly as it was."""
    probe = fork(state)
    fold(probe, submission)
    decided = settle(probe, policy)
    seal(probe)  # only read from here on
    job_id = submission.job_id
    preempts = tuple(
        d.job_id
        for d in decided
        if isinstance(d, ev.JobPreemptionRequested) and d.for_job == job_id
    )
    evicts = tuple(
        d.job_id for d in decided if isinstance(d, ev.WarmPoolTerminated) and d.for_job == job_id
    )
    dispatch = next(
        (d for d in decided if isinstance(d, ev.JobDispatched) and d.job_id == job_id), None
    )
    if dispatch is not None:
        return DryRun(
            job_id=job_id,
            starts=True,
            hosts=dispatch.hosts,
            warm_pool=dispatch.warm_pool,
            rule=dispatch.rule,
            preempts=preempts,
            evicts=evicts,
        )
    return DryRun(
        job_id=job_id,
        starts=False,
        preempts=preempts,
        evicts=evicts,
        wait=why_waiting(probe, job_id),
    )
