"""Why a RUNNABLE job waits, derived on read from the folded state (spec section 9).

Nothing is logged per waiting job per pass: the reason is a pure function of the
state. An `Explainer` runs the allocation step once in explain mode (on its
overlay, folding nothing) and reads every job's reason off it: a blocked head
gets the limit that stops it, a job behind it the number of jobs ahead.
"""

from __future__ import annotations

from quartermaster.core import misconfiguration, wait_reasons
from quartermaster.core.decide import allocate
from quartermaster.core.model import Job, JobStatus
from quartermaster.core.state import ShareKey, State
from quartermaster.core.wait_reasons import WaitReason
from quartermaster.events import State as Toggle


class Explainer:
    """Answers `why(job_id)` for one state; build a new one once the state moves on."""

    def __init__(self, state: State) -> None:
        self.state = state
        self._heads: dict[ShareKey, tuple[int, WaitReason | None]] | None = None
        self._most: dict[ShareKey, int] = {}
        self._fitting: dict[ShareKey, list[int]] = {}  # fitting jobs from the cursor on
        # A misfit depends on the share, unit and instance count only: once per kind of job.
        self._misfits: dict[tuple[str, str, str, int], misconfiguration.Misfit | None] = {}

    def why(self, job_id: str) -> WaitReason | None:
        """Why the job waits; None when it is not a waiting RUNNABLE job."""
        state = self.state
        job = state.jobs.get(job_id)
        if job is None or job.status is not JobStatus.RUNNABLE or job.awaiting_outcome:
            return None
        kind = (job.queue, job.share, job.unit, job.count)
        if kind not in self._misfits:
            self._misfits[kind] = misconfiguration.misfit(state, job)
        found = self._misfits[kind]
        if found is not None:
            return wait_reasons.misconfigured(job, found.text, found.allowed)
        env = state.environments[state.environment_of(job.queue)]
        if env.state is Toggle.DISABLED:
            return wait_reasons.environment_disabled(job, env.name)
        key = state.share_key(job)
        cursor, head_reason = self.heads().get(key, (0, None))
        runnable = state.runnable[key]
        index = runnable.index((*job.order_key(), job.job_id))
        if index < cursor:  # the pass would place it now
            return wait_reasons.awaiting_pass(job)
        if index == cursor:
            return head_reason or wait_reasons.awaiting_pass(job)
        ahead = self._fitting_between(key, cursor, index)
        if ahead == 0:  # only misfits ahead: the pass skips them and reaches this job
            return wait_reasons.awaiting_pass(job)
        return wait_reasons.behind(job, ahead, self._first_fitting(key, cursor, index))

    def heads(self) -> dict[ShareKey, tuple[int, WaitReason | None]]:
        """Per share and unit: where the pass's cursor stopped, and why its head waits."""
        if self._heads is None:
            self._heads = {}
            for unit_pass in allocate(self.state, [], explain=True):
                assert unit_pass.explain is not None
                for name, cursor in unit_pass.cursor.items():
                    key = (unit_pass.queue, name, unit_pass.unit)
                    self._heads[key] = (cursor, unit_pass.explain.get(name))
        return self._heads

    # ---- jobs behind the head -------------------------------------------------
    def _fits(self, key: ShareKey, job: Job) -> bool:
        if key not in self._most:
            self._most[key] = misconfiguration.most_instances(self.state, *key)
        return job.count <= self._most[key]

    def _fitting_between(self, key: ShareKey, cursor: int, index: int) -> int:
        """Jobs in the share's order from the cursor up to `index` that can fit at all."""
        counts = self._fitting.setdefault(key, [0])
        runnable = self.state.runnable[key]
        while len(counts) <= index - cursor:
            job = self.state.jobs[runnable[cursor + len(counts) - 1][-1]]
            counts.append(counts[-1] + self._fits(key, job))
        return counts[index - cursor]

    def _first_fitting(self, key: ShareKey, cursor: int, index: int) -> Job:
        runnable = self.state.runnable[key]
        for position in range(cursor, index):
            job = self.state.jobs[runnable[position][-1]]
            if self._fits(key, job):
                return job
        return self.state.jobs[runnable[cursor][-1]]


def why_waiting(state: State, job_id: str) -> WaitReason | None:
    """Why one job waits (runs one explained allocation step: use an `Explainer` for many)."""
    return Explainer(state).why(job_id)
