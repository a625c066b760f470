"""`qm.v1.ServiceJobs`: submit, update, terminate, describe, list and watch jobs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from qm_admission import access, queries, validation
from qm_admission.consistency import announce, seq_in_trailer
from qm_admission.errors import Code, RequestRejected, invalid, not_found
from qm_admission.group_commit import SubmitGroups
from qm_admission.roles import known_roles
from qm_admission.servicers.base import Backends, write
from qm_admission.submission import Outcome, SubmissionPlanner
from qm_admission.tokens import new_job_id
from qm_admission.translate import dry_run_result, job_reply, parse
from qm_admission.waiting import Reads, WaitReasons, visible_ids
from qm_admission.watch import WatchFilter
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.core import State, dry_run
from quartermaster.events import Event
from quartermaster.store import arns

MAX_JOBS_PER_CALL = 1000


class ServiceJobs(rpc.ServiceJobsServicer):
    def __init__(self, backends: Backends) -> None:
        self._b = backends
        self._planner = SubmissionPlanner(
            backends.read_model,
            backends.settings.max_keep_alive_seconds,
            require_command=backends.settings.require_command,
            roles=backends.roles,
        )
        # A group's requests encode to about twice their protobuf size in the envelope.
        self.submit_groups = SubmitGroups(
            backends.writer,
            self._planner,
            max_bytes=backends.writer.max_envelope_bytes // 4,
            linger_seconds=backends.settings.submit_linger_seconds,
        )
        self._waiting = WaitReasons()

    # ---- writes ---------------------------------------------------------------
    async def SubmitServiceJob(
        self, request: pb.SubmitServiceJobRequest, context: Any
    ) -> pb.SubmitServiceJobResponse:
        if request.dry_run:
            return await self._dry_run(request, context)
        (outcome,) = await self._submit([request], context)
        if isinstance(outcome, RequestRejected):
            raise outcome
        return outcome

    async def _dry_run(
        self, request: pb.SubmitServiceJobRequest, context: Any
    ) -> pb.SubmitServiceJobResponse:
        """Validate as a submission, answer what the pass would do with it; write nothing."""
        for refused in _refused_submissions([request]).values():
            raise refused
        if request.client_token:
            validation.check_client_token(request.client_token)
        state = await self._b.consistency.folded(context)
        events = validation.submit_job(
            request,
            state,
            job_id=new_job_id(),
            at=time.time(),
            max_keep_alive_seconds=self._b.settings.max_keep_alive_seconds,
            require_command=self._b.settings.require_command,
            known_roles=known_roles(self._b.roles),
        )
        submitted = next(e for e in events if isinstance(e, ev.JobSubmitted))
        result = dry_run(state, submitted)
        reads = _reads()
        return pb.SubmitServiceJobResponse(
            job_name=submitted.job_name,
            dry_run_result=dry_run_result(result, lambda ids: visible_ids(ids, state, reads)),
        )

    async def SubmitServiceJobs(
        self, request: pb.SubmitServiceJobsRequest, context: Any
    ) -> pb.SubmitServiceJobsResponse:
        if not request.jobs:
            raise invalid("jobs", "needs at least one job")
        if len(request.jobs) > MAX_JOBS_PER_CALL:
            raise invalid("jobs", f"takes at most {MAX_JOBS_PER_CALL} jobs per call")
        for index, job in enumerate(request.jobs):
            if job.dry_run:
                raise invalid(f"jobs[{index}].dry_run", "is taken by SubmitServiceJob only")
        outcomes = await self._submit(list(request.jobs), context)
        response = pb.SubmitServiceJobsResponse()
        for index, outcome in enumerate(outcomes):
            result = response.results.add(index=index)
            if isinstance(outcome, RequestRejected):
                result.error.CopyFrom(
                    pb.ApiError(
                        code=outcome.code.value, message=outcome.message, field=outcome.field
                    )
                )
            else:
                result.job.CopyFrom(outcome)
        return response

    async def _submit(
        self, requests: list[pb.SubmitServiceJobRequest], context: Any
    ) -> list[Outcome]:
        in_trailer = seq_in_trailer(context)
        refused = _refused_submissions(requests)
        allowed = [r for i, r in enumerate(requests) if i not in refused]
        outcomes: list[Outcome] = []
        if allowed:
            written = await self.submit_groups.submit(allowed)
            await announce(context, written.seq, in_trailer)
            outcomes = list(written.result)
        merged = iter(outcomes)
        return [refused[i] if i in refused else next(merged) for i in range(len(requests))]

    async def UpdateServiceJob(
        self, request: pb.UpdateServiceJobRequest, context: Any
    ) -> pb.UpdateServiceJobResponse:
        def plan(s: State, now: float) -> list[Event]:
            job_scope(s, access.P.JOBS_UPDATE, request.job_id)
            return validation.update_job(request, s, at=now)

        await write(self._b, context, plan)
        job = self._b.follower.state.jobs[request.job_id]
        reply = job_reply(job.job_id, job.job_name)
        return pb.UpdateServiceJobResponse(
            job_id=reply.job_id, job_name=reply.job_name, job_arn=reply.job_arn
        )

    async def TerminateServiceJob(
        self, request: pb.TerminateServiceJobRequest, context: Any
    ) -> pb.TerminateServiceJobResponse:
        def plan(s: State, now: float) -> list[Event]:
            job_scope(s, access.P.JOBS_TERMINATE, request.job_id)
            return validation.terminate_job(request, s, at=now)

        await write(self._b, context, plan)
        return pb.TerminateServiceJobResponse()

    # ---- reads ----------------------------------------------------------------
    async def DescribeServiceJob(
        self, request: pb.DescribeServiceJobRequest, context: Any
    ) -> pb.DescribeServiceJobResponse:
        if not request.job_id:
            raise invalid("job_id", "is required")
        await self._b.consistency.projected(context)
        doc = await self._b.read_model.describe_job(request.job_id)
        if doc is None:
            raise not_found("job_id", f"job {request.job_id!r} does not exist")
        state = await self._b.consistency.folded(context)
        (doc,) = self._waiting.shown([doc], state, _reads())
        job = parse(doc, pb.ServiceJobDetail())
        access.require_share(access.P.JOBS_READ, job.job_queue, job.quota_share_name)
        return pb.DescribeServiceJobResponse(job=job)

    async def ListServiceJobs(
        self, request: pb.ListServiceJobsRequest, context: Any
    ) -> pb.ListServiceJobsResponse:
        state = await self._b.consistency.folded(context)
        query = queries.list_jobs(request, state)
        shares = access.visible_shares(query.job_queue)
        if query.quota_share is not None:
            access.require_share(access.P.JOBS_READ, query.job_queue, query.quota_share)
        elif shares is not None and not shares:
            access.require_queue(access.P.JOBS_READ, query.job_queue)
        await self._b.consistency.projected(context)
        docs, token = await self._b.read_model.list_jobs(
            query.job_queue,
            quota_share=query.quota_share,
            status=query.status,
            job_name=query.job_name,
            before_created_at=query.before_created_at,
            after_created_at=query.after_created_at,
            max_results=query.max_results,
            next_token=query.next_token,
            quota_shares=sorted(shares) if shares is not None else None,
        )
        docs = self._waiting.shown(docs, state, _reads())
        return pb.ListServiceJobsResponse(
            job_summary_list=[parse(d, pb.ServiceJobSummary()) for d in docs],
            next_token=token or "",
        )

    async def WatchServiceJobs(
        self, request: pb.WatchServiceJobsRequest, context: Any
    ) -> AsyncIterator[pb.JobStateChange]:
        state = await self._b.consistency.folded(context)
        where = _visible(queries.watch(request, state), state)
        subscription = self._b.hub.subscribe(where, request.after_sequence)
        try:
            while (change := await subscription.next()) is not None:
                yield change
            if subscription.overflowed:
                raise RequestRejected(
                    Code.RESOURCE_EXHAUSTED,
                    "after_sequence",
                    "the stream fell too far behind; resume with after_sequence",
                )
        finally:
            self._b.hub.unsubscribe(subscription)


def _reads() -> Reads | None:
    """Whose jobs the caller may see (None: everyone's)."""
    principal = access.caller()
    return None if principal.may_read_all() else principal.reads_share


def job_scope(state: State, permission: access.Permission, job_id: str) -> None:
    """Share scope of a write naming a job, judged on the state the write is planned on.

    Checked inside the plan, not before it: a job the caller's view did not hold yet
    (just submitted by another share) would otherwise skip the check and then be
    found by the caught-up plan. Unknown ids fall through to NOT_FOUND.
    """
    job = state.jobs.get(job_id)
    if job is not None:
        access.require_share(permission, job.queue, job.share)


def _refused_submissions(requests: list[pb.SubmitServiceJobRequest]) -> dict[int, RequestRejected]:
    """Submissions into a share the caller is not a member of, by index."""
    refused: dict[int, RequestRejected] = {}
    for index, request in enumerate(requests):
        try:
            access.require_share(
                access.P.JOBS_SUBMIT,
                arns.name_of(request.job_queue),
                arns.name_of(request.quota_share_name),
            )
        except RequestRejected as rejected:
            refused[index] = rejected
    return refused


def _visible(where: WatchFilter, state: State) -> WatchFilter:
    """A member's watch sees only its own shares' jobs; naming another's job is refused."""
    principal = access.caller()
    if principal.may_read_all():
        return where
    for job_id in where.job_ids:
        job = state.jobs[job_id]
        access.require_share(access.P.JOBS_READ, job.queue, job.share)
    if where.job_queue is not None and where.quota_share is not None:
        access.require_share(access.P.JOBS_READ, where.job_queue, where.quota_share)
    elif where.job_queue is not None:
        access.require_queue(access.P.JOBS_READ, where.job_queue)
    allowed = frozenset((s.job_queue, s.quota_share) for s in principal.shares)
    return msgspec.structs.replace(where, allowed_shares=allowed)
