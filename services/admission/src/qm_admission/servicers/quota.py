"""`qm.v1.QuotaManagement`: environments, policies, queues and quota shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from qm_admission import access, queries, validation
from qm_admission.errors import not_found
from qm_admission.names import Kind, arn, reference, share_arn
from qm_admission.paging import page, page_size
from qm_admission.servicers.base import Backends, write
from qm_admission.servicers.explain import HIDDEN
from qm_admission.servicers.resources import ResourceRequests
from qm_admission.translate import parse
from qm_admission.validation import common
from qm_admission.waiting import WaitReasons
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc

DEFAULT_FRONT = 100


class QuotaManagement(ResourceRequests, rpc.QuotaManagementServicer):
    def __init__(self, backends: Backends) -> None:
        self._b = backends
        self._waiting = WaitReasons()

    # ---- service environments ---------------------------------------------------
    async def CreateServiceEnvironment(
        self, request: pb.CreateServiceEnvironmentRequest, context: Any
    ) -> pb.CreateServiceEnvironmentResponse:
        await write(
            self._b,
            context,
            lambda s, now: validation.create_service_environment(request, s, at=now),
        )
        name = request.service_environment_name
        return pb.CreateServiceEnvironmentResponse(
            service_environment_name=name,
            service_environment_arn=arn(Kind.SERVICE_ENVIRONMENT, name),
        )

    async def UpdateServiceEnvironment(
        self, request: pb.UpdateServiceEnvironmentRequest, context: Any
    ) -> pb.UpdateServiceEnvironmentResponse:
        await write(
            self._b,
            context,
            lambda s, now: validation.update_service_environment(request, s, at=now),
        )
        name = reference(
            "service_environment", request.service_environment, Kind.SERVICE_ENVIRONMENT
        )
        return pb.UpdateServiceEnvironmentResponse(
            service_environment_name=name,
            service_environment_arn=arn(Kind.SERVICE_ENVIRONMENT, name),
        )

    async def DescribeServiceEnvironments(
        self, request: pb.DescribeServiceEnvironmentsRequest, context: Any
    ) -> pb.DescribeServiceEnvironmentsResponse:
        names = queries.names(
            "service_environments", request.service_environments, Kind.SERVICE_ENVIRONMENT
        )
        await self._b.consistency.projected(context)
        docs = await self._b.read_model.describe_environments(names)
        items, token = page(docs, request.max_results, request.next_token)
        return pb.DescribeServiceEnvironmentsResponse(
            service_environments=[parse(d, pb.ServiceEnvironmentDetail()) for d in items],
            next_token=token,
        )

    # ---- scheduling policies ----------------------------------------------------
    async def CreateSchedulingPolicy(
        self, request: pb.CreateSchedulingPolicyRequest, context: Any
    ) -> pb.CreateSchedulingPolicyResponse:
        await write(
            self._b, context, lambda s, now: validation.create_scheduling_policy(request, s, at=now)
        )
        return pb.CreateSchedulingPolicyResponse(
            name=request.name, arn=arn(Kind.SCHEDULING_POLICY, request.name)
        )

    # ---- job queues -------------------------------------------------------------
    async def CreateJobQueue(
        self, request: pb.CreateJobQueueRequest, context: Any
    ) -> pb.CreateJobQueueResponse:
        await write(
            self._b, context, lambda s, now: validation.create_job_queue(request, s, at=now)
        )
        name = request.job_queue_name
        return pb.CreateJobQueueResponse(
            job_queue_name=name, job_queue_arn=arn(Kind.JOB_QUEUE, name)
        )

    async def UpdateJobQueue(
        self, request: pb.UpdateJobQueueRequest, context: Any
    ) -> pb.UpdateJobQueueResponse:
        await write(
            self._b, context, lambda s, now: validation.update_job_queue(request, s, at=now)
        )
        name = reference("job_queue", request.job_queue, Kind.JOB_QUEUE)
        return pb.UpdateJobQueueResponse(
            job_queue_name=name, job_queue_arn=arn(Kind.JOB_QUEUE, name)
        )

    async def DescribeJobQueues(
        self, request: pb.DescribeJobQueuesRequest, context: Any
    ) -> pb.DescribeJobQueuesResponse:
        names = queries.names("job_queues", request.job_queues, Kind.JOB_QUEUE)
        await self._b.consistency.projected(context)
        docs = await self._b.read_model.describe_queues(names)
        items, token = page(docs, request.max_results, request.next_token)
        return pb.DescribeJobQueuesResponse(
            job_queues=[parse(d, pb.JobQueueDetail()) for d in items], next_token=token
        )

    async def GetJobQueueSnapshot(
        self, request: pb.GetJobQueueSnapshotRequest, context: Any
    ) -> pb.GetJobQueueSnapshotResponse:
        state = await self._b.consistency.folded(context)
        queue = common.queue(state, "job_queue", request.job_queue)
        access.require_queue(access.P.QUEUE_SNAPSHOT, queue.name)
        limit = page_size(request.max_results or DEFAULT_FRONT)
        await self._b.consistency.projected(context)
        doc = await self._b.read_model.queue_snapshot(queue.name, limit)
        if doc is None:
            raise not_found("job_queue", f"job queue {queue.name!r} does not exist")
        principal = access.caller()
        reads = None if principal.may_read_all() else principal.reads_share
        doc["front_of_queue"] = self._waiting.shown(doc["front_of_queue"], state, reads)
        snapshot = parse(doc, pb.GetJobQueueSnapshotResponse())
        if not principal.may_read_all():
            hide_other_shares_jobs(snapshot, queue.name, principal.reads_share)
        return snapshot

    # ---- quota shares -----------------------------------------------------------
    async def CreateQuotaShare(
        self, request: pb.CreateQuotaShareRequest, context: Any
    ) -> pb.CreateQuotaShareResponse:
        await write(
            self._b, context, lambda s, now: validation.create_quota_share(request, s, at=now)
        )
        return pb.CreateQuotaShareResponse(**_share_names(request))

    async def UpdateQuotaShare(
        self, request: pb.UpdateQuotaShareRequest, context: Any
    ) -> pb.UpdateQuotaShareResponse:
        await write(
            self._b, context, lambda s, now: validation.update_quota_share(request, s, at=now)
        )
        return pb.UpdateQuotaShareResponse(**_share_names(request))

    async def DeleteQuotaShare(
        self, request: pb.DeleteQuotaShareRequest, context: Any
    ) -> pb.DeleteQuotaShareResponse:
        await write(
            self._b, context, lambda s, now: validation.delete_quota_share(request, s, at=now)
        )
        return pb.DeleteQuotaShareResponse()

    async def DescribeQuotaShare(
        self, request: pb.DescribeQuotaShareRequest, context: Any
    ) -> pb.DescribeQuotaShareResponse:
        state = await self._b.consistency.folded(context)
        queue = common.queue(state, "job_queue", request.job_queue)
        share = common.share(state, queue.name, "quota_share_name", request.quota_share_name)
        access.require_share(access.P.SHARES_READ, queue.name, share.name)
        await self._b.consistency.projected(context)
        doc = await self._b.read_model.describe_share(queue.name, share.name)
        if doc is None:
            raise not_found(
                "quota_share_name", f"quota share {share.name!r} does not exist in {queue.name!r}"
            )
        return parse(doc, pb.DescribeQuotaShareResponse())

    async def ListQuotaShares(
        self, request: pb.ListQuotaSharesRequest, context: Any
    ) -> pb.ListQuotaSharesResponse:
        state = await self._b.consistency.folded(context)
        queue = common.queue(state, "job_queue", request.job_queue)
        size = page_size(request.max_results)
        await self._b.consistency.projected(context)
        docs, token = await self._b.read_model.list_shares(
            queue.name, size, request.next_token or None
        )
        return pb.ListQuotaSharesResponse(
            quota_shares=[parse(d, pb.QuotaShareDetail()) for d in docs], next_token=token or ""
        )


def hide_other_shares_jobs(
    snapshot: pb.GetJobQueueSnapshotResponse, queue: str, reads: Callable[[str, str], bool]
) -> None:
    """Blank the ids, names and reasons of jobs the caller may not read, in place.

    A member sees where its jobs stand in the queue and every share's usage, not the
    other shares' jobs (as in ExplainServiceJob): their places stay, anonymous.
    """
    for job in snapshot.front_of_queue:
        if not reads(queue, job.quota_share_name):
            job.job_id, job.job_arn, job.job_name, job.status_reason = "", "", HIDDEN, ""
            job.ClearField("wait_reason")
    for share in snapshot.quota_shares:
        if not reads(queue, share.quota_share_name):
            share.head_job_ids[:] = [""] * len(share.head_job_ids)


def _share_names(
    request: pb.CreateQuotaShareRequest | pb.UpdateQuotaShareRequest,
) -> dict[str, str]:
    """The queue, name and ARN a share create or update answers with."""
    queue = reference("job_queue", request.job_queue, Kind.JOB_QUEUE)
    return {
        "job_queue": queue,
        "quota_share_name": request.quota_share_name,
        "quota_share_arn": share_arn(queue, request.quota_share_name),
    }
