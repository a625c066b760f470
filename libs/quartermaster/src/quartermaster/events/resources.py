"""Facts about configuration resources beyond create/update: deletes, policy updates, tags.

A delete is written only once admission found the resource unused (AWS's rules:
DISABLED and unreferenced first), so the fold just drops it. Tags are keyed by the
resource's kind and name, the same key its ARN spells (`store.arns`).
"""

from __future__ import annotations

from enum import StrEnum

from quartermaster.events.base import Request


class ResourceKind(StrEnum):
    """What a tag event names; the values are the resource types of the ARNs."""

    SERVICE_ENVIRONMENT = "service-environment"
    SCHEDULING_POLICY = "scheduling-policy"
    JOB_QUEUE = "job-queue"
    QUOTA_SHARE = "quota-share"
    JOB = "job"


class ServiceEnvironmentDeleted(Request, frozen=True, tag="service_environment.deleted"):
    name: str


class SchedulingPolicyUpdated(Request, frozen=True, tag="scheduling_policy.updated"):
    name: str
    idle_resource_assignment_strategy: str = "FIFO"


class SchedulingPolicyDeleted(Request, frozen=True, tag="scheduling_policy.deleted"):
    name: str


class JobQueueDeleted(Request, frozen=True, tag="job_queue.deleted"):
    name: str


class _TagChange(Request, frozen=True):
    """Names one resource: `name` (a job id for jobs), and its queue for a quota share."""

    kind: ResourceKind
    name: str
    job_queue: str = ""


class ResourceTagged(_TagChange, frozen=True, tag="resource.tagged"):
    """`tags` are added to the resource's tags, replacing the values of keys it had."""

    tags: dict[str, str] = {}


class ResourceUntagged(_TagChange, frozen=True, tag="resource.untagged"):
    tag_keys: tuple[str, ...] = ()
