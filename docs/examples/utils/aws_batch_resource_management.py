"""The helpers the SageMaker SDK's quota-management notebook imports from its `utils/`
folder (v3-examples/training-examples/aws_batch/utils), for Quartermaster.

Same names and arguments; the resource manager talks to admission through
`quartermaster.client.Quartermaster` instead of a boto3 Batch client, and waiting
follows each job's changes on a stream instead of describing it every 5 s.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum

from quartermaster.client import Quartermaster, QuartermasterError, TrainingQueue
from quartermaster.client.queued_job import TrainingQueuedJob

logger = logging.getLogger(__name__)

AWAIT_TIMEOUT_SECONDS = 120.0


@dataclass
class Resource:
    name: str
    arn: str


@dataclass
class Resources:
    job_queue: Resource | None = None
    service_environment: Resource | None = None
    scheduling_policy: Resource | None = None
    quota_shares: list[Resource] = field(default_factory=list)


@dataclass
class QuotaShareConfig:
    name: str
    capacity_unit: str
    max_capacity: int
    in_share_preemption: bool
    sharing_strategy: str
    borrow_limit: int | None = None


class JobStatus(str, Enum):  # noqa: UP042 - as the notebook's utils define it
    SUBMITTED = "SUBMITTED"
    PENDING = "PENDING"
    RUNNABLE = "RUNNABLE"
    SCHEDULED = "SCHEDULED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"

    @staticmethod
    def active() -> set[JobStatus]:
        return {
            JobStatus.SUBMITTED,
            JobStatus.PENDING,
            JobStatus.RUNNABLE,
            JobStatus.SCHEDULED,
            JobStatus.STARTING,
            JobStatus.RUNNING,
        }

    @staticmethod
    def dispatched() -> set[JobStatus]:
        return {
            JobStatus.SCHEDULED,
            JobStatus.STARTING,
            JobStatus.RUNNING,
            JobStatus.SUCCEEDED,
            JobStatus.FAILED,
        }

    @staticmethod
    def terminal() -> set[JobStatus]:
        return {JobStatus.SUCCEEDED, JobStatus.FAILED}


class AwsBatchResourceManager:
    """Creates the environment, policy, queue and quota shares (skipping existing ones)."""

    def __init__(self, client: Quartermaster) -> None:
        self.client = client

    def _created(self, create: object, *args: object, **kwargs: object) -> None:
        try:
            create(*args, **kwargs)  # type: ignore[operator]
        except QuartermasterError as err:
            if err.code.name != "ALREADY_EXISTS":
                raise
            logger.info("Resource already exists: %s", err.details)


def create_quota_management_resources(
    resource_manager: AwsBatchResourceManager,
    scheduling_policy_name: str,
    job_queue_name: str,
    service_environment_name: str,
    capacity_unit: str,
    max_capacity: int,
    quota_share_configs: list[QuotaShareConfig],
) -> Resources:
    c = resource_manager.client
    make = resource_manager._created
    make(c.create_service_environment, service_environment_name, {capacity_unit: max_capacity})
    make(c.create_scheduling_policy, scheduling_policy_name)
    make(c.create_job_queue, job_queue_name, service_environment_name, scheduling_policy_name)
    for qs in quota_share_configs:
        make(
            c.create_quota_share,
            job_queue_name,
            qs.name,
            {qs.capacity_unit: qs.max_capacity},
            qs.sharing_strategy,
            qs.borrow_limit,
            qs.in_share_preemption,
        )
    queue = c.describe_job_queues([job_queue_name])[0]
    environment = c.describe_service_environments([service_environment_name])[0]
    resources = Resources(
        job_queue=Resource(job_queue_name, queue.job_queue_arn),
        service_environment=Resource(service_environment_name, environment.service_environment_arn),
        scheduling_policy=Resource(scheduling_policy_name, scheduling_policy_name),
        quota_shares=[
            Resource(s.quota_share_name, s.quota_share_arn)
            for s in c.list_quota_shares(job_queue_name)
        ],
    )
    logger.info("Resource creation complete: %s", resources)
    return resources


def await_jobs(
    job_groups: list[tuple[list[TrainingQueuedJob], set[JobStatus]]],
    timeout: float = AWAIT_TIMEOUT_SECONDS,
) -> None:
    """Wait for jobs to reach desired statuses, in parallel; TimeoutError past `timeout`."""

    def wait_for(job: TrainingQueuedJob, desired: set[JobStatus]) -> None:
        status = job.wait_for_status({s.value for s in desired}, timeout)
        logger.info("Job: %s is %s", job.job_name, status)

    tasks = [(job, statuses) for jobs, statuses in job_groups for job in jobs]
    with ThreadPoolExecutor(max_workers=len(tasks)) as executor:
        for future in [executor.submit(wait_for, job, statuses) for job, statuses in tasks]:
            future.result()


def _status_message(job_detail: dict[str, object]) -> str:
    status_reason = job_detail.get("statusReason")
    summary = job_detail.get("preemptionSummary") or {}
    recent = summary.get("recentPreemptedAttempts") or [{}]  # type: ignore[attr-defined]
    preemption_reason = recent[-1].get("statusReason")
    if preemption_reason and job_detail.get("status") not in {"SCHEDULED", "STARTING"}:
        return f" ({preemption_reason})"
    if status_reason:
        return f" ({status_reason})"
    return ""


def list_jobs_by_quota_share(
    training_queue: TrainingQueue, quota_share_names: list[str], statuses: set[JobStatus]
) -> dict[str, list[dict[str, object]]]:
    """Log every job of the queue by quota share (and return the descriptions)."""
    all_jobs = [
        job
        for status in statuses
        for qs_name in quota_share_names
        for job in training_queue.list_jobs_by_share(quota_share_name=qs_name, status=status.value)
    ]
    jobs_by_qs: dict[str, list[dict[str, object]]] = {name: [] for name in quota_share_names}
    for job in all_jobs:
        job_detail = job.describe()
        jobs_by_qs.setdefault(str(job_detail["quotaShareName"]), []).append(job_detail)
    log_lines = []
    for qs_name, job_details in jobs_by_qs.items():
        log_lines.append(
            f"QuotaShare: {qs_name}"
            + "".join(
                f"\n  -> {jd['jobName']} (priority: {jd['schedulingPriority']}): "
                f"{jd['status']}{_status_message(jd)}"
                for jd in job_details
            )
        )
    logger.info("Listing jobs by QuotaShare:\n" + "\n".join(log_lines))
    return jobs_by_qs
