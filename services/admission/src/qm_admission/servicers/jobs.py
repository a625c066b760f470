"""`qm.v1.ServiceJobs`: submit, update, terminate, describe, list and watch jobs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from qm_admission import queries, validation
from qm_admission.consistency import announce
from qm_admission.errors import RequestRejected, invalid, not_found
from qm_admission.servicers.base import Backends, write
from qm_admission.submission import Outcome, SubmissionPlanner
from qm_admission.translate import job_reply, parse
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc

MAX_JOBS_PER_CALL = 1000


class ServiceJobs(rpc.ServiceJobsServicer):
    def __init__(self, backends: Backends) -> None:
        self._b = backends
        self._planner = SubmissionPlanner(
            backends.read_model, backends.settings.max_keep_alive_seconds
        )

    # ---- writes ---------------------------------------------------------------
    async def SubmitServiceJob(
        self, request: pb.SubmitServiceJobRequest, context: Any
    ) -> pb.SubmitServiceJobResponse:
        (outcome,) = await self._submit([request], context)
        if isinstance(outcome, RequestRejected):
            raise outcome
        return outcome

    async def SubmitServiceJobs(
        self, request: pb.SubmitServiceJobsRequest, context: Any
    ) -> pb.SubmitServiceJobsResponse:
        if not request.jobs:
            raise invalid("jobs", "needs at least one job")
        if len(request.jobs) > MAX_JOBS_PER_CALL:
            raise invalid("jobs", f"takes at most {MAX_JOBS_PER_CALL} jobs per call")
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
        written = await self._b.writer.write(
            lambda state, now: self._planner.plan(requests, state, now)
        )
        await announce(context, written.seq)
        return written.result

    async def UpdateServiceJob(
        self, request: pb.UpdateServiceJobRequest, context: Any
    ) -> pb.UpdateServiceJobResponse:
        await write(self._b, context, lambda s, now: validation.update_job(request, s, at=now))
        job = self._b.follower.state.jobs[request.job_id]
        reply = job_reply(job.job_id, job.job_name)
        return pb.UpdateServiceJobResponse(
            job_id=reply.job_id, job_name=reply.job_name, job_arn=reply.job_arn
        )

    async def TerminateServiceJob(
        self, request: pb.TerminateServiceJobRequest, context: Any
    ) -> pb.TerminateServiceJobResponse:
        await write(self._b, context, lambda s, now: validation.terminate_job(request, s, at=now))
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
        return pb.DescribeServiceJobResponse(job=parse(doc, pb.ServiceJobDetail()))

    async def ListServiceJobs(
        self, request: pb.ListServiceJobsRequest, context: Any
    ) -> pb.ListServiceJobsResponse:
        state = await self._b.consistency.folded(context)
        query = queries.list_jobs(request, state)
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
        )
        return pb.ListServiceJobsResponse(
            job_summary_list=[parse(d, pb.ServiceJobSummary()) for d in docs],
            next_token=token or "",
        )

    async def WatchServiceJobs(
        self, request: pb.WatchServiceJobsRequest, context: Any
    ) -> AsyncIterator[pb.JobStateChange]:
        state = await self._b.consistency.folded(context)
        where = queries.watch(request, state)
        subscription = self._b.hub.subscribe(where, request.after_sequence)
        try:
            while (change := await subscription.next()) is not None:
                yield change
            if subscription.overflowed:
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "the stream fell too far behind; resume with after_sequence",
                )
        finally:
            self._b.hub.unsubscribe(subscription)
