"""Core entities as JSON-ready documents shaped exactly as their qm.v1 messages.

Keys are the proto field names and enums their value names, so the gRPC layer
turns a stored document into its message with
`json_format.ParseDict(doc, pb.ServiceJobDetail(), ignore_unknown_fields=True)`.
Times are int epoch milliseconds (0 = not yet / never). Pure functions of the
folded state: no I/O, and they never change the state they read.
"""

from __future__ import annotations

from typing import Any

from quartermaster.core.model import (
    TERMINAL_STATUSES,
    Attempt,
    Environment,
    Host,
    Job,
    Queue,
    Share,
    WarmPool,
    WarmPoolStatus,
)
from quartermaster.core.state import State
from quartermaster.core.training_job import training_job_arn, training_job_name
from quartermaster.core.wait_reasons import WaitReason
from quartermaster.events import SharingStrategy
from quartermaster.store import arns

Doc = dict[str, Any]


SUMMARY_FIELDS = (
    "job_id",
    "job_name",
    "job_arn",
    "job_queue",
    "quota_share_name",
    "service_job_type",
    "status",
    "status_reason",
    "scheduling_priority",
    "created_at",
    "started_at",
    "stopped_at",
    "capacity_usage",
    "latest_attempt",
    "scheduled_at",
)

# AWS `status` of a configuration resource: its change is folded when it is read.
VALID = "RESOURCE_STATUS_VALID"

_POOL_STATUS = {
    WarmPoolStatus.AVAILABLE: "WARM_POOL_STATUS_AVAILABLE",
    WarmPoolStatus.IN_USE: "WARM_POOL_STATUS_IN_USE",
    WarmPoolStatus.REUSED: "WARM_POOL_STATUS_REUSED",
    WarmPoolStatus.TERMINATED: "WARM_POOL_STATUS_TERMINATED",
}


def epoch_ms(seconds: float | None) -> int:
    """Event time (epoch seconds) as the API's int epoch milliseconds; None -> 0."""
    return 0 if seconds is None else round(seconds * 1000)


def pool_status_name(status: WarmPoolStatus) -> str:
    return _POOL_STATUS[status]


# ---- jobs -------------------------------------------------------------------------


def attempt_doc(job: Job, attempt: Attempt) -> Doc:
    """`ServiceJobAttemptDetail`: each attempt is a training job, named from the job and
    the attempt's number (the one its hosts were dispatched with, as they name it)."""
    name = training_job_name(job.job_name, job.job_id, attempt.number)
    arn = training_job_arn(name)
    doc: Doc = {
        "host_ids": list(attempt.hosts),
        "started_at": epoch_ms(attempt.started_at),
        "stopped_at": epoch_ms(attempt.stopped_at),
        "status_reason": attempt.status_reason,
        "training_job_name": name,
        "training_job_arn": arn,
        "model_artifacts": attempt.model_artifacts,
        "service_resource_id": {"name": "TrainingJobArn", "value": arn},
    }
    if attempt.exit_code is not None:
        doc["exit_code"] = attempt.exit_code
    if attempt.seconds_at_risk is not None:  # preempted: the work its preemption threw away
        doc["lost_unit_seconds"] = job.count * attempt.seconds_at_risk
    if attempt.start_phases is not None:
        phases = attempt.start_phases
        doc["start_phases"] = {
            "pull_seconds": phases.pull_s,
            "volume_seconds": phases.volume_s,
            "staging_seconds": phases.staging_s,
            "container_seconds": phases.container_s,
            "warm": phases.warm,
        }
    return doc


def _started_at(job: Job) -> float | None:
    """When the job last went RUNNING (the latest attempt that got that far)."""
    for attempt in reversed(job.attempts):
        if attempt.started_at is not None:
            return attempt.started_at
    return None


def _capacity_usage(job: Job) -> list[Doc]:
    """What the job holds now; once it ended, what its last attempt held (as AWS keeps it)."""
    ended_after_running = job.status in TERMINAL_STATUSES and job.attempts
    if not job.hosts and not ended_after_running:
        return []
    return [{"capacity_unit": job.unit, "quantity": job.count}]


def _retry_strategy(job: Job) -> Doc:
    rules = []
    for rule in job.evaluate_on_exit:
        entry: Doc = {"action": f"RETRY_ACTION_{rule.action.upper()}"}
        if rule.on_status_reason is not None:
            entry["on_status_reason"] = rule.on_status_reason
        if rule.on_exit_code is not None:
            entry["on_exit_code"] = rule.on_exit_code
        if rule.on_reason is not None:
            entry["on_reason"] = rule.on_reason
        rules.append(entry)
    return {"attempts": job.retry_attempts, "evaluate_on_exit": rules}


def warm_pool_status_doc(pool: WarmPool) -> Doc:
    return {
        "status": pool_status_name(pool.status),
        "resource_retained_billable_time_in_seconds": pool.billable_seconds,
        "reused_by_job": pool.reused_by_job or "",
    }


def job_doc(state: State, job: Job) -> Doc:
    """`ServiceJobDetail`."""
    preemption: Doc = {}
    if job.preemption_retries is not None:
        preemption["preemption_retries_before_termination"] = job.preemption_retries
    doc: Doc = {
        "job_id": job.job_id,
        "job_name": job.job_name,
        "job_arn": arns.job(job.job_id),
        "job_queue": job.queue,
        "quota_share_name": job.share,
        "service_job_type": job.service_job_type,
        "status": f"JOB_STATUS_{job.status.value}",
        "status_reason": job.status_reason,
        "scheduling_priority": job.priority,
        "created_at": epoch_ms(job.created_at),
        "started_at": epoch_ms(_started_at(job)),
        "stopped_at": epoch_ms(job.stopped_at),
        "is_terminated": job.is_terminated,
        "submitted_by": job.submitted_by,
        "priority_updated_by": job.priority_updated_by,
        "terminated_by": job.terminated_by,
        "attempts": [attempt_doc(job, a) for a in job.attempts],
        "preemption_summary": {
            "preempted_attempt_count": job.preempted_count,
            "recent_preempted_attempts": [attempt_doc(job, a) for a in job.recent_preemptions],
            "lost_unit_seconds": job.lost_unit_seconds,
        },
        "capacity_usage": _capacity_usage(job),
        "scheduled_at": epoch_ms(job.attempts[-1].dispatched_at) if job.attempts else 0,
        "retry_strategy": _retry_strategy(job),
        "preemption_configuration": preemption,
        # The core keeps min(attemptDurationSeconds, MaxRuntimeInSeconds): the limit in force.
        "timeout_config": {"attempt_duration_seconds": job.attempt_duration_seconds or 0},
        "tags": dict(job.tags),
        "service_request_payload": job.payload,
    }
    if job.attempts:
        doc["latest_attempt"] = attempt_doc(job, job.attempts[-1])
    pool = state.pools.get(job.job_id)
    if pool is not None:
        doc["warm_pool_status"] = warm_pool_status_doc(pool)
    return doc


def job_summary(detail: Doc) -> Doc:
    """`ServiceJobSummary` of a `ServiceJobDetail` document."""
    return {key: detail[key] for key in SUMMARY_FIELDS if key in detail}


# ---- why a job waits (derived on read, never stored) ------------------------------


def wait_reason_doc(reason: WaitReason) -> Doc:
    """`WaitReason`."""
    return {
        "code": f"WAIT_REASON_CODE_{reason.code.value}",
        "message": reason.message,
        "instances_needed": reason.needed,
        "share_units": reason.held,
        "share_limit": reason.limit,
        "units_free": reason.free,
        "jobs_ahead": reason.jobs_ahead,
        "job_ids": list(reason.job_ids),
        "quota_share_names": list(reason.shares),
    }


def showing_wait(doc: Doc, reason: WaitReason) -> Doc:
    """A RUNNABLE job's document (detail, summary or front-of-queue entry) with why it waits.

    Not stored with the job: the reason depends on the whole queue, which any event
    may change, so the read side derives it from its folded state when it answers.
    The recorded status reason (why the job is RUNNABLE again, e.g. "Preempted: ...")
    stays first and the wait message follows it.
    """
    recorded = str(doc.get("status_reason") or "")
    if reason.message in recorded:
        text = recorded
    else:
        text = f"{recorded}; {reason.message}" if recorded else reason.message
    return {**doc, "status_reason": text, "wait_reason": wait_reason_doc(reason)}


# ---- warm pools and hosts ---------------------------------------------------------


def pool_doc(state: State, pool: WarmPool) -> Doc:
    """`WarmPoolSummary`."""
    job = state.jobs.get(pool.job_id)
    available = pool.status is WarmPoolStatus.AVAILABLE
    return {
        "training_job_name": job.job_name if job is not None else "",
        "job_id": pool.job_id,
        "job_queue": pool.queue,
        "quota_share_name": pool.share,
        "status": pool_status_name(pool.status),
        "resource_retained_billable_time_in_seconds": pool.billable_seconds,
        "reused_by_job": pool.reused_by_job or "",
        "instance_type": pool.unit,
        "instance_count": pool.count,
        "host_ids": list(pool.hosts),
        "expires_at": epoch_ms(pool.expires_at) if available else 0,
    }


def running_job(state: State, host: Host) -> str:
    """The job whose attempt holds the host; "" when idle or kept in a warm pool."""
    if host.holder is None:
        return ""
    job = state.jobs.get(host.holder)
    if job is not None and host.host_id in job.hosts:
        return job.job_id
    return ""


def host_doc(state: State, host: Host) -> Doc:
    """`NodeSummary`."""
    return {
        "host_id": host.host_id,
        "instance_type": host.unit,
        "gpu_count": host.gpu_count,
        "service_environment": host.environment or "",
        "state": f"NODE_STATE_{host.status.value}",
        "job_id": running_job(state, host),
        "last_heartbeat_at": epoch_ms(host.last_heartbeat),
    }


# ---- configuration ----------------------------------------------------------------


def _limits(limits: dict[str, int]) -> list[Doc]:
    return [{"capacity_unit": u, "max_capacity": n} for u, n in sorted(limits.items())]


def share_doc(share: Share, created_at: float | None = None) -> Doc:
    """`QuotaShareDetail` (the store fills `created_at` from the row)."""
    sharing: Doc = {"strategy": f"SHARING_STRATEGY_{share.strategy.value}"}
    if share.strategy is SharingStrategy.LEND_AND_BORROW:
        sharing["borrow_limit"] = share.borrow_limit
    return {
        "job_queue": share.queue,
        "quota_share_name": share.name,
        "quota_share_arn": arns.quota_share(share.queue, share.name),
        "capacity_limits": _limits(share.limits),
        "resource_sharing_configuration": sharing,
        "preemption_configuration": {
            "in_share_preemption": f"IN_SHARE_PREEMPTION_{share.in_share_preemption.value}"
        },
        "state": f"QUOTA_SHARE_STATE_{share.state.value}",
        "created_at": epoch_ms(created_at),
        "tags": dict(share.tags),
        "status": VALID,
        "status_reason": "",
    }


def share_usage(state: State, share: Share) -> list[Doc]:
    """`ShareCapacityUsage` per unit: the units it may hold and the units it holds."""
    held = {
        unit: n
        for (queue, name, unit), n in state.use.items()
        if queue == share.queue and name == share.name and n
    }
    out = []
    for unit in sorted(set(share.limits) | set(held)):
        quantity, own = held.get(unit, 0), share.own(unit)
        out.append(
            {
                "capacity_unit": unit,
                "quantity": quantity,
                "max_capacity": own,
                "borrowed": max(0, quantity - own),
            }
        )
    return out


def usable_capacity(state: State, environment: Environment, unit: str) -> int:
    """C of spec section 3: what the environment holds plus the free hosts it may take."""
    in_use = state.env_use.get((environment.name, unit), 0)
    free = len(state.free_unbound.get(unit, ())) + len(
        state.free_bound.get((environment.name, unit), ())
    )
    room = environment.max_capacity.get(unit, 0) - in_use
    return in_use + max(0, min(room, free))


def oversubscribed(state: State, share: Share) -> bool:
    """True when the queue's shares' own limits sum past the usable capacity of a unit
    this share has a limit for."""
    queue = state.queues.get(share.queue)
    environment = state.environments.get(queue.environment) if queue is not None else None
    if environment is None:
        return False
    siblings = [s for (q, _), s in state.shares.items() if q == share.queue]
    return any(
        sum(s.own(unit) for s in siblings) > usable_capacity(state, environment, unit)
        for unit in share.limits
    )


def environment_doc(state: State, environment: Environment, created_at: float | None = None) -> Doc:
    """`ServiceEnvironmentDetail` (the store fills `created_at` from the row)."""
    capacity = [
        {
            "capacity_unit": unit,
            "max_capacity": limit,
            "usable_capacity": usable_capacity(state, environment, unit),
            "in_use": state.env_use.get((environment.name, unit), 0),
        }
        for unit, limit in sorted(environment.max_capacity.items())
    ]
    return {
        "service_environment_name": environment.name,
        "service_environment_arn": arns.service_environment(environment.name),
        "state": f"SERVICE_ENVIRONMENT_STATE_{environment.state.value}",
        "capacity_limits": _limits(environment.max_capacity),
        "capacity": capacity,
        "created_at": epoch_ms(created_at),
        "tags": dict(environment.tags),
        "status": VALID,
        "status_reason": "",
        "service_environment_type": "SAGEMAKER_TRAINING",
    }


def queue_doc(queue: Queue, created_at: float | None = None) -> Doc:
    """`JobQueueDetail` (the store fills `created_at` from the row)."""
    return {
        "job_queue_name": queue.name,
        "job_queue_arn": arns.job_queue(queue.name),
        "state": f"QUEUE_STATE_{queue.state.value}",
        "scheduling_policy_arn": arns.scheduling_policy(queue.policy),
        "service_environment_order": [{"order": 1, "service_environment": queue.environment}],
        "created_at": epoch_ms(created_at),
        "tags": dict(queue.tags),
        "status": VALID,
        "status_reason": "",
        "job_queue_type": "SAGEMAKER_TRAINING",
        "priority": queue.priority,
    }


def policy_doc(
    name: str, strategy: str, created_at: float | None = None, tags: dict[str, str] | None = None
) -> Doc:
    """`SchedulingPolicyDetail` (the store fills `created_at` from the row)."""
    return {
        "tags": dict(tags or {}),
        "name": name,
        "arn": arns.scheduling_policy(name),
        "quota_share_policy": {
            "idle_resource_assignment_strategy": f"IDLE_RESOURCE_ASSIGNMENT_STRATEGY_{strategy}"
        },
        "created_at": epoch_ms(created_at),
    }
