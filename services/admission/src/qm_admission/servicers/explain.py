"""`ServiceJobs.ExplainServiceJob`: a job's history, replayed from the log on request.

The explanation needs the state at every step of the job (the shares' usage,
the candidates a preemption ranked), so it replays the log from its start up to
the position this admission instance has folded, with the same library code as
`qm explain --from-file` (`quartermaster.audit.explain`). The replay yields to
the event loop as it goes, so other calls are served meanwhile.

Members see their own shares' jobs only: in an explanation, the other shares'
job ids and names are hidden (their share names and usage are not).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec

from qm_admission import access
from qm_admission.errors import (
    Code,
    RequestRejected,
    TransientAdmissionError,
    invalid,
    not_found,
)
from qm_admission.servicers.base import Backends
from qm_admission.servicers.jobs import ServiceJobs
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.audit.envelope import from_message
from quartermaster.audit.errors import PermanentAuditError
from quartermaster.audit.explain import (
    DecisionInfo,
    Explainer,
    Explanation,
    Transition,
    job_label,
)
from quartermaster.audit.stream import read_through
from quartermaster.audit.wire import to_proto
from quartermaster.bus.errors import TransientBusError
from quartermaster.core import State

log = logging.getLogger(__name__)

YIELD_EVERY = 256  # messages folded between two yields to the event loop
# Each explain replays the log from its start: a few at a time, a few more waiting, and
# beyond that RESOURCE_EXHAUSTED, so a burst of explains cannot stall the writes.
MAX_REPLAYING = 2
MAX_WAITING = 8
HIDDEN = "(another quota share's job)"


class ExplainingServiceJobs(ServiceJobs):
    """The ServiceJobs service with ExplainServiceJob."""

    def __init__(self, backends: Backends) -> None:
        super().__init__(backends)
        self._backends = backends
        self._replaying = asyncio.Semaphore(MAX_REPLAYING)
        self._explains_waiting = 0

    async def ExplainServiceJob(
        self, request: pb.ExplainServiceJobRequest, context: Any
    ) -> pb.ExplainServiceJobResponse:
        if not request.job_id:
            raise invalid("job_id", "is required")
        state = await self._backends.consistency.folded(context)
        job = state.jobs.get(request.job_id)
        if job is None:
            raise not_found("job_id", f"job {request.job_id!r} does not exist")
        access.require_share(access.P.JOBS_READ, job.queue, job.share)
        if self._explains_waiting >= MAX_WAITING:
            raise RequestRejected(
                Code.RESOURCE_EXHAUSTED,
                "",
                f"{MAX_WAITING} explains are already waiting for a replay of the log; retry",
            )
        self._explains_waiting += 1
        try:
            await self._replaying.acquire()
        finally:
            self._explains_waiting -= 1
        try:
            explanation = await self._replay(request.job_id, self._backends.follower.seq)
        finally:
            self._replaying.release()

        principal = access.caller()
        if not principal.may_read_all():
            explanation = hide_other_shares(explanation, state, principal.reads_share)
        return to_proto(explanation)

    async def _replay(self, job_id: str, until: int) -> Explanation:
        """The job's history up to `until`; the caller's folded state holds the job.

        The read resumes where an early-ending range read stopped (`read_through`); a
        replay that still comes back without the job is transient, not a bug of the
        request, so UNAVAILABLE rather than INTERNAL.
        """
        explainer = Explainer(job_id)
        reader = read_through(self._backends.follower.log, 1, until)
        try:
            async with contextlib.aclosing(reader):
                async for entry in reader:
                    explainer.feed(from_message(entry.seq, entry.subject, entry.data))
                    if entry.seq % YIELD_EVERY == 0:
                        await asyncio.sleep(0)
            return explainer.result()
        except (PermanentAuditError, TransientBusError) as err:
            log.warning(
                "explain job_id=%s: log read ended at seq %d of %d", job_id, explainer.seq, until
            )
            raise TransientAdmissionError(
                f"the log read ended at seq {explainer.seq}, before job {job_id!r} (log at {until})"
            ) from err


def hide_other_shares(x: Explanation, state: State, reads: Any) -> Explanation:
    """The explanation without the ids and names of jobs the caller may not read."""

    def visible(job_id: str) -> bool:
        job = state.jobs.get(job_id)
        return job is not None and bool(reads(job.queue, job.share))

    def decision(d: DecisionInfo) -> DecisionInfo:
        candidates = [
            c
            if visible(c.job_id)
            else msgspec.structs.replace(c, job_id="", job_name=HIDDEN, why="ranked by the rule")
            for c in d.candidates
        ]
        for_job = d.for_job if not d.for_job or visible(d.for_job) else ""
        return msgspec.structs.replace(d, for_job=for_job, candidates=candidates)

    def hide(text: str, job_id: str) -> str:
        job = state.jobs.get(job_id)
        if job is not None:
            text = text.replace(job_label(job.job_name, job_id), HIDDEN)
        return text.replace(job_id, HIDDEN)

    def transition(t: Transition) -> Transition:
        if t.decision is None:
            return t
        d = decision(t.decision)
        summary = t.summary
        if t.decision.for_job and not d.for_job:
            summary = hide(summary, t.decision.for_job)
        for hidden in {c.job_id for c in t.decision.candidates} - {c.job_id for c in d.candidates}:
            summary = hide(summary, hidden)
        return msgspec.structs.replace(t, decision=d, summary=summary)

    return msgspec.structs.replace(x, transitions=[transition(t) for t in x.transitions])
