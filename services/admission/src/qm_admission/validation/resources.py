"""Deletes, scheduling-policy updates and tags, with AWS Batch's rules.

A service environment or job queue is deleted only once DISABLED and unused; a
scheduling policy only when no queue uses it. Any other case is FAILED_PRECONDITION
naming why, and nothing is written. Tags address a resource by its ARN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from qm_admission.errors import failed_precondition, invalid, not_found
from qm_admission.names import Kind, check_name, reference
from qm_admission.references import job_id_of, share_of
from qm_admission.validation import common
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State
from quartermaster.core.fold import tags_of
from quartermaster.core.model import TERMINAL_STATUSES, WarmPoolStatus

MAX_TAGS = 50
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
MAX_PRIORITY = 1000
DEFAULT_PRIORITY = 1
RESOURCE_TYPE = "SAGEMAKER_TRAINING"
_KINDS = {k.value: k for k in ev.ResourceKind}


# ---- values -----------------------------------------------------------------------


def check_tags(field: str, tags: Mapping[str, str], *, kept: int = 0) -> dict[str, str]:
    """AWS tag rules: 1-50 in all (with `kept` the resource has), keys 1-128, values <= 256."""
    if len(tags) + kept > MAX_TAGS:
        raise invalid(field, f"allows at most {MAX_TAGS} tags per resource, got {len(tags) + kept}")
    for key, value in tags.items():
        if not 1 <= len(key) <= MAX_TAG_KEY:
            raise invalid(field, f"tag keys must be 1-{MAX_TAG_KEY} characters, got {key!r}")
        if key.lower().startswith("aws:"):
            raise invalid(field, f"tag key {key!r}: the aws: prefix is reserved")
        if len(value) > MAX_TAG_VALUE:
            raise invalid(field, f"tag {key!r}: values must be at most {MAX_TAG_VALUE} characters")
    return dict(tags)


def resource_type(field: str, value: str) -> None:
    """`jobQueueType` / `serviceEnvironmentType`: SAGEMAKER_TRAINING is the only one."""
    if value and value != RESOURCE_TYPE:
        raise invalid(field, f"must be {RESOURCE_TYPE} (the only type), got {value!r}")


def queue_priority(field: str, value: int) -> int:
    if not 0 <= value <= MAX_PRIORITY:
        raise invalid(field, f"must be 0-{MAX_PRIORITY}, got {value}")
    return value


# ---- deletes ----------------------------------------------------------------------


def delete_service_environment(
    request: pb.DeleteServiceEnvironmentRequest, state: State, *, at: float
) -> list[ev.Event]:
    env = common.environment(state, "service_environment", request.service_environment)
    if env.state is not ev.State.DISABLED:
        raise failed_precondition(
            "service_environment",
            f"service environment {env.name!r} is ENABLED; disable it before deleting it",
        )
    for queue in state.queues.values():
        if queue.environment == env.name:
            raise failed_precondition(
                "service_environment",
                f"service environment {env.name!r} serves job queue {queue.name!r}; "
                "delete the queue first",
            )
    return [ev.ServiceEnvironmentDeleted(at=at, name=env.name)]


def delete_job_queue(
    request: pb.DeleteJobQueueRequest, state: State, *, at: float
) -> list[ev.Event]:
    queue = common.queue(state, "job_queue", request.job_queue)
    if queue.state is not ev.State.DISABLED:
        raise failed_precondition(
            "job_queue", f"job queue {queue.name!r} is ENABLED; disable it before deleting it"
        )
    shares = state.shares_of(queue.name)
    if shares:
        names = ", ".join(s.name for s in shares)
        raise failed_precondition(
            "job_queue", f"job queue {queue.name!r} has quota shares ({names}); delete them first"
        )
    for job in state.jobs.values():
        if job.queue == queue.name and (job.status not in TERMINAL_STATUSES or job.hosts):
            raise failed_precondition(
                "job_queue", f"job queue {queue.name!r} has unfinished jobs (e.g. {job.job_id})"
            )
    return [ev.JobQueueDeleted(at=at, name=queue.name)]


def delete_quota_share(
    request: pb.DeleteQuotaShareRequest, state: State, *, at: float
) -> list[ev.Event]:
    """AWS: the share must be DISABLED; its unfinished jobs are terminated, then it goes.

    The terminations are request events written with the delete, so the log says why
    each job ended; the scheduler stops the running ones as for any termination.
    """
    queue = common.queue(state, "job_queue", request.job_queue)
    share = common.share(state, queue.name, "quota_share_name", request.quota_share_name)
    if share.state is not ev.State.DISABLED:
        raise failed_precondition(
            "quota_share_name",
            f"quota share {share.name!r} is ENABLED; disable it before deleting it",
        )
    for pool in state.pools.values():
        if (pool.queue, pool.share) == (queue.name, share.name) and pool.status in (
            WarmPoolStatus.AVAILABLE,
            WarmPoolStatus.IN_USE,
        ):
            raise failed_precondition(
                "quota_share_name",
                f"quota share {share.name!r} holds warm pool {pool.job_id}; "
                "set its keep-alive to 0 first",
            )
    for job in state.jobs.values():
        ended = job.status in TERMINAL_STATUSES
        if (job.queue, job.share) == (queue.name, share.name) and ended and job.retained:
            raise failed_precondition(
                "quota_share_name",
                f"job {job.job_id} of quota share {share.name!r} still holds its hosts for a "
                "warm pool; set the pool's keep-alive to 0 (or wait for it) first",
            )
    reason = f"Quota share {share.name} deleted"
    events: list[ev.Event] = [
        ev.JobTerminationRequested(at=at, job_id=job.job_id, reason=reason)
        for job in sorted(state.jobs.values(), key=lambda j: j.job_id)
        if (job.queue, job.share) == (queue.name, share.name)
        and job.status not in TERMINAL_STATUSES
    ]
    events.append(ev.QuotaShareDeleted(at=at, job_queue=queue.name, name=share.name))
    return events


# ---- scheduling policies ----------------------------------------------------------


def update_scheduling_policy(
    request: pb.UpdateSchedulingPolicyRequest, state: State, *, at: float
) -> list[ev.Event]:
    name = common.policy(state, "arn", request.arn)
    common.idle_assignment_strategy(request.quota_share_policy)
    return [ev.SchedulingPolicyUpdated(at=at, name=name, idle_resource_assignment_strategy="FIFO")]


def delete_scheduling_policy(
    request: pb.DeleteSchedulingPolicyRequest, state: State, *, at: float
) -> list[ev.Event]:
    name = common.policy(state, "arn", request.arn)
    for queue in state.queues.values():
        if queue.policy == name:
            raise failed_precondition(
                "arn", f"scheduling policy {name!r} is used by job queue {queue.name!r}"
            )
    return [ev.SchedulingPolicyDeleted(at=at, name=name)]


def policy_names(field: str, refs: Sequence[str]) -> list[str]:
    """1-100 policy names or ARNs (DescribeSchedulingPolicies)."""
    if not 1 <= len(refs) <= 100:
        raise invalid(field, f"needs 1-100 names or ARNs, got {len(refs)}")
    return [reference(f"{field}[{i}]", r, Kind.SCHEDULING_POLICY) for i, r in enumerate(refs)]


# ---- tags -------------------------------------------------------------------------


class Resource(msgspec.Struct, frozen=True):
    """A resource named by an ARN: its kind, name (job id for jobs) and queue (shares)."""

    kind: ev.ResourceKind
    name: str
    job_queue: str = ""


def resource(state: State, field: str, arn: str) -> tuple[Resource, dict[str, str]]:
    """The resource `arn` names and its tags; NOT_FOUND when there is none."""
    if not arn:
        raise invalid(field, "is required")
    if not arn.startswith("arn:"):
        raise invalid(field, f"must be a resource ARN, got {arn!r}")
    parts = arn.split(":", 5)
    path = parts[5] if len(parts) == 6 else ""
    head = path.split("/", 1)[0]
    if "/quota-share/" in path:
        queue, name = share_of(field, arn)
        found = Resource(ev.ResourceKind.QUOTA_SHARE, name, queue)
    elif head == "job":
        found = Resource(ev.ResourceKind.JOB, job_id_of(field, arn))
    elif head in _KINDS:
        found = Resource(_KINDS[head], check_name(field, path.partition("/")[2]))
    else:
        raise invalid(
            field,
            f"{arn!r} is not the ARN of a service environment, scheduling policy, "
            "job queue, quota share or job",
        )
    tags = tags_of(state, found.kind, found.name, found.job_queue)
    if tags is None:
        raise not_found(field, f"resource {arn!r} does not exist")
    return found, tags


def tag_resource(request: pb.TagResourceRequest, state: State, *, at: float) -> list[ev.Event]:
    found, tags = resource(state, "resource_arn", request.resource_arn)
    if not request.tags:
        raise invalid("tags", "needs at least one tag")
    new = {k: v for k, v in request.tags.items() if k not in tags}
    check_tags("tags", request.tags, kept=len(tags) + len(new) - len(request.tags))
    return [
        ev.ResourceTagged(
            at=at,
            kind=found.kind,
            name=found.name,
            job_queue=found.job_queue,
            tags=dict(request.tags),
        )
    ]


def untag_resource(request: pb.UntagResourceRequest, state: State, *, at: float) -> list[ev.Event]:
    found, _ = resource(state, "resource_arn", request.resource_arn)
    if not 1 <= len(request.tag_keys) <= MAX_TAGS:
        raise invalid("tag_keys", f"needs 1-{MAX_TAGS} keys, got {len(request.tag_keys)}")
    for i, key in enumerate(request.tag_keys):
        if not 1 <= len(key) <= MAX_TAG_KEY:
            raise invalid(f"tag_keys[{i}]", f"must be 1-{MAX_TAG_KEY} characters, got {key!r}")
    return [
        ev.ResourceUntagged(
            at=at,
            kind=found.kind,
            name=found.name,
            job_queue=found.job_queue,
            tag_keys=tuple(request.tag_keys),
        )
    ]
