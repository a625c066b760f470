"""The AWS-fidelity part of `qm.v1.QuotaManagement`: deletes, scheduling policies, tags.

A mixin of `QuotaManagement` (it needs its backends), kept apart so each module stays
one concern. Tags of a job follow the job's share scope (members tag their own
shares' jobs, as AWS lets a job's owner); tags of configuration resources are
configuration (admins write, readers of configuration read).
"""

from __future__ import annotations

from typing import Any

from qm_admission import access, validation
from qm_admission.errors import invalid
from qm_admission.servicers.base import Backends, write
from qm_admission.translate import parse
from qm_admission.validation import resources
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State
from quartermaster.events import Event

MAX_POLICIES = 100


class ResourceRequests:
    _b: Backends

    # ---- deletes ----------------------------------------------------------------
    async def DeleteServiceEnvironment(
        self, request: pb.DeleteServiceEnvironmentRequest, context: Any
    ) -> pb.DeleteServiceEnvironmentResponse:
        await write(
            self._b,
            context,
            lambda s, now: validation.delete_service_environment(request, s, at=now),
        )
        return pb.DeleteServiceEnvironmentResponse()

    async def DeleteJobQueue(
        self, request: pb.DeleteJobQueueRequest, context: Any
    ) -> pb.DeleteJobQueueResponse:
        await write(
            self._b, context, lambda s, now: validation.delete_job_queue(request, s, at=now)
        )
        return pb.DeleteJobQueueResponse()

    # ---- scheduling policies ----------------------------------------------------
    async def UpdateSchedulingPolicy(
        self, request: pb.UpdateSchedulingPolicyRequest, context: Any
    ) -> pb.UpdateSchedulingPolicyResponse:
        await write(
            self._b, context, lambda s, now: validation.update_scheduling_policy(request, s, at=now)
        )
        return pb.UpdateSchedulingPolicyResponse()

    async def DeleteSchedulingPolicy(
        self, request: pb.DeleteSchedulingPolicyRequest, context: Any
    ) -> pb.DeleteSchedulingPolicyResponse:
        await write(
            self._b, context, lambda s, now: validation.delete_scheduling_policy(request, s, at=now)
        )
        return pb.DeleteSchedulingPolicyResponse()

    async def DescribeSchedulingPolicies(
        self, request: pb.DescribeSchedulingPoliciesRequest, context: Any
    ) -> pb.DescribeSchedulingPoliciesResponse:
        names = resources.policy_names("arns", request.arns)
        await self._b.consistency.projected(context)
        docs = await self._b.read_model.describe_policies(names)
        return pb.DescribeSchedulingPoliciesResponse(
            scheduling_policies=[parse(d, pb.SchedulingPolicyDetail()) for d in docs]
        )

    async def ListSchedulingPolicies(
        self, request: pb.ListSchedulingPoliciesRequest, context: Any
    ) -> pb.ListSchedulingPoliciesResponse:
        if request.max_results and not 1 <= request.max_results <= MAX_POLICIES:
            raise invalid("max_results", f"must be 1-{MAX_POLICIES}, got {request.max_results}")
        await self._b.consistency.projected(context)
        docs, token = await self._b.read_model.list_policies(
            request.max_results or MAX_POLICIES, request.next_token or None
        )
        return pb.ListSchedulingPoliciesResponse(
            scheduling_policies=[pb.SchedulingPolicyListingDetail(arn=d["arn"]) for d in docs],
            next_token=token or "",
        )

    # ---- tags -------------------------------------------------------------------
    async def TagResource(
        self, request: pb.TagResourceRequest, context: Any
    ) -> pb.TagResourceResponse:
        def plan(s: State, now: float) -> list[Event]:
            tag_scope(s, access.P.TAGS_WRITE, request.resource_arn)
            return validation.tag_resource(request, s, at=now)

        await write(self._b, context, plan)
        return pb.TagResourceResponse()

    async def UntagResource(
        self, request: pb.UntagResourceRequest, context: Any
    ) -> pb.UntagResourceResponse:
        def plan(s: State, now: float) -> list[Event]:
            tag_scope(s, access.P.TAGS_WRITE, request.resource_arn)
            return validation.untag_resource(request, s, at=now)

        await write(self._b, context, plan)
        return pb.UntagResourceResponse()

    async def ListTagsForResource(
        self, request: pb.ListTagsForResourceRequest, context: Any
    ) -> pb.ListTagsForResourceResponse:
        state = await self._b.consistency.folded(context)
        tags = tag_scope(state, access.P.TAGS_READ, request.resource_arn)
        return pb.ListTagsForResourceResponse(tags=tags)


def tag_scope(state: State, permission: access.Permission, arn: str) -> dict[str, str]:
    """Check the caller may read or write the tags of `arn`; return the tags it has.

    Judged on the state the write is planned on (as `jobs.job_scope`). A job's tags
    follow its share; a quota share's tags are read as the share is; other
    resources' tags need the configuration permission of the same direction.
    """
    found, tags = resources.resource(state, "resource_arn", arn)
    writes = permission is access.P.TAGS_WRITE
    if found.kind is ev.ResourceKind.JOB:
        job = state.jobs[found.name]
        access.require_share(permission, job.queue, job.share)
    elif found.kind is ev.ResourceKind.QUOTA_SHARE and not writes:
        access.require_share(access.P.SHARES_READ, found.job_queue, found.name)
    else:
        access.require_granted(access.P.CONFIG_WRITE if writes else access.P.CONFIG_READ)
    return dict(tags)
