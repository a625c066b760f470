"""Terminal jobs leave the folded state after a retention period (they stay in the log).

A job is forgotten once it is SUCCEEDED or FAILED, holds no host, waits for no
outcome or warm pool, and ended at least `retention_seconds` before the newest
event folded (event time: a replay forgets the same jobs at the same point).
Sweeps run a quarter period apart (a walk over the jobs each time), so a job
goes between 1 and 1.25 periods after it ended.
Its warm-pool record goes with it when that pool is over (Reused or Terminated).

Nothing the pass decides reads such a job: every handler already ignores events
for a terminal job, so the decisions are the same with or without retention
(tests/unit/core/test_incremental_pass.py checks it on random histories).
Client-token uniqueness does not rest on the folded state: admission claims a
token in Postgres before it appends (kept forever), and a token's job id is
derived from the token, so a repeat past the retention finds the claim and
appends nothing. Who answers about old jobs (DescribeServiceJob) reads Postgres;
a service that answers from its folded state keeps retention off (None).
"""

from __future__ import annotations

from quartermaster.core.model import TERMINAL_STATUSES, Job, WarmPoolStatus
from quartermaster.core.state import State

OVER = frozenset({WarmPoolStatus.REUSED, WarmPoolStatus.TERMINATED})


def forgettable(state: State, job: Job, horizon: float) -> bool:
    if job.status not in TERMINAL_STATUSES or job.hosts or job.retained or job.awaiting_outcome:
        return False
    if job.stopped_at is None or job.stopped_at > horizon:
        return False
    pool = state.pools.get(job.job_id)
    return pool is None or pool.status in OVER


def sweep(state: State) -> int:
    """Forget what is past retention; the next sweep is due a quarter period later."""
    retention = state.retention_seconds
    assert retention is not None
    horizon = state.now - retention
    gone = [job_id for job_id, job in state.jobs.items() if forgettable(state, job, horizon)]
    for job_id in gone:
        del state.jobs[job_id]
        state.pools.pop(job_id, None)
    state.next_sweep = state.now + max(retention / 4, 1.0)
    return len(gone)
