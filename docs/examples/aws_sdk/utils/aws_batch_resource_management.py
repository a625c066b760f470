"""The helpers the SageMaker SDK's quota-management notebook imports from its `utils/`
folder (v3-examples/training-examples/aws_batch/utils), on boto3 as there.

Nothing here knows about Quartermaster: the Batch client is boto3's, and
`eval "$(qm aws-env)"` is what points it (and the SDK) at a `qm up` stack. A
resource that exists already is skipped on "Object already exists", as the
notebook's helpers do; deleting disables each resource and waits before removing it.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from botocore.exceptions import ClientError

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5  # the notebook polls every 5 s: a SageMaker job takes minutes to start
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
        return {JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING}

    @staticmethod
    def terminal() -> set[JobStatus]:
        return {JobStatus.SUCCEEDED, JobStatus.FAILED}


class AwsBatchResourceManager:
    """Creates and deletes the environment, policy, queue and quota shares."""

    def __init__(self, batch_client: Any) -> None:
        self._batch_client = batch_client

    def _create(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response: dict[str, Any] = getattr(self._batch_client, operation)(**kwargs)
            return response
        except ClientError as error:
            if "Object already exists" in error.response["Error"]["Message"]:
                logger.info("Resource already exists: %s", error.response["Error"]["Message"])
                return {}
            raise

    def create_service_environment(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._create("create_service_environment", **request)

    def create_scheduling_policy(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._create("create_scheduling_policy", **request)

    def create_job_queue(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._create("create_job_queue", **request)

    def create_quota_share(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._create("create_quota_share", **request)

    def delete_resources(self, resources: Resources) -> None:
        """Disable, then delete: shares, the queue, the environment, the policy. A delete
        refused while the resource is still in use (its jobs' hosts stopping) is tried
        again, as the notebook's helpers wait for each state change."""
        batch = self._batch_client
        for share in resources.quota_shares:
            batch.update_quota_share(quotaShareArn=share.arn, state="DISABLED")
            _until_done(batch.delete_quota_share, quotaShareArn=share.arn)
        if resources.job_queue is not None:
            batch.update_job_queue(jobQueue=resources.job_queue.arn, state="DISABLED")
            _until_done(batch.delete_job_queue, jobQueue=resources.job_queue.arn)
        if resources.service_environment is not None:
            name = resources.service_environment.arn
            batch.update_service_environment(serviceEnvironment=name, state="DISABLED")
            _until_done(batch.delete_service_environment, serviceEnvironment=name)
        if resources.scheduling_policy is not None:
            _until_done(batch.delete_scheduling_policy, arn=resources.scheduling_policy.arn)
        logger.info("Resources deleted: %s", resources)


def _until_done(call: Any, timeout: float = AWAIT_TIMEOUT_SECONDS, **kwargs: Any) -> None:
    """`call(**kwargs)`, again while Batch answers ClientException (not yet possible)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            call(**kwargs)
            return
        except ClientError as error:
            if error.response["Error"]["Code"] != "ClientException":
                raise
            if time.monotonic() > deadline:
                raise
            logger.info("Waiting: %s", error.response["Error"]["Message"])
            time.sleep(POLL_SECONDS)


def create_quota_management_resources(
    resource_manager: AwsBatchResourceManager,
    scheduling_policy_name: str,
    job_queue_name: str,
    service_environment_name: str,
    capacity_unit: str,
    max_capacity: int,
    quota_share_configs: list[QuotaShareConfig],
) -> Resources:
    resource_manager.create_service_environment(
        {
            "serviceEnvironmentName": service_environment_name,
            "serviceEnvironmentType": "SAGEMAKER_TRAINING",
            "capacityLimits": [{"capacityUnit": capacity_unit, "maxCapacity": max_capacity}],
        }
    )
    resource_manager.create_scheduling_policy(
        {
            "name": scheduling_policy_name,
            "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"},
        }
    )
    batch = resource_manager._batch_client
    policy_arn = next(
        p["arn"]
        for p in batch.list_scheduling_policies()["schedulingPolicies"]
        if p["arn"].endswith(f"/{scheduling_policy_name}")
    )
    resource_manager.create_job_queue(
        {
            "jobQueueName": job_queue_name,
            "jobQueueType": "SAGEMAKER_TRAINING",
            "priority": 1,
            "schedulingPolicyArn": policy_arn,
            "serviceEnvironmentOrder": [
                {"order": 1, "serviceEnvironment": service_environment_name}
            ],
        }
    )
    for qs in quota_share_configs:
        sharing: dict[str, Any] = {"strategy": qs.sharing_strategy}
        if qs.borrow_limit is not None:
            sharing["borrowLimit"] = qs.borrow_limit
        resource_manager.create_quota_share(
            {
                "jobQueue": job_queue_name,
                "quotaShareName": qs.name,
                "capacityLimits": [
                    {"capacityUnit": qs.capacity_unit, "maxCapacity": qs.max_capacity}
                ],
                "resourceSharingConfiguration": sharing,
                "preemptionConfiguration": {
                    "inSharePreemption": "ENABLED" if qs.in_share_preemption else "DISABLED"
                },
            }
        )
    queue = batch.describe_job_queues(jobQueues=[job_queue_name])["jobQueues"][0]
    environment = batch.describe_service_environments(
        serviceEnvironments=[service_environment_name]
    )["serviceEnvironments"][0]
    shares = batch.list_quota_shares(jobQueue=job_queue_name)["quotaShares"]
    resources = Resources(
        job_queue=Resource(job_queue_name, queue["jobQueueArn"]),
        service_environment=Resource(
            service_environment_name, environment["serviceEnvironmentArn"]
        ),
        scheduling_policy=Resource(scheduling_policy_name, policy_arn),
        quota_shares=[Resource(s["quotaShareName"], s["quotaShareArn"]) for s in shares],
    )
    logger.info("Resource creation complete: %s", resources)
    return resources


def await_jobs(
    job_groups: list[tuple[list[Any], set[JobStatus]]],
    timeout: float = AWAIT_TIMEOUT_SECONDS,
) -> None:
    """Wait for jobs (the SDK's TrainingQueuedJob) to reach desired statuses, in parallel."""

    def wait_for(job: Any, desired: set[JobStatus]) -> None:
        wanted = {s.value for s in desired}
        deadline = time.monotonic() + timeout
        while (status := job.describe()["status"]) not in wanted:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{job.job_name} is {status}, not one of {sorted(wanted)}")
            time.sleep(POLL_SECONDS)
        logger.info("Job: %s is %s", job.job_name, status)

    tasks = [(job, statuses) for jobs, statuses in job_groups for job in jobs]
    with ThreadPoolExecutor(max_workers=len(tasks)) as executor:
        for future in [executor.submit(wait_for, job, statuses) for job, statuses in tasks]:
            future.result()


def list_jobs_by_quota_share(
    training_queue: Any, quota_share_names: list[str], statuses: set[JobStatus]
) -> dict[str, list[dict[str, Any]]]:
    """Log every job of the queue by quota share (and return the descriptions)."""
    jobs_by_qs: dict[str, list[dict[str, Any]]] = {name: [] for name in quota_share_names}
    for status in statuses:
        for qs_name in quota_share_names:
            for job in training_queue.list_jobs_by_share(status.value, quota_share_name=qs_name):
                jobs_by_qs[qs_name].append(job.describe())
    logger.info(
        "Listing jobs by QuotaShare:\n%s",
        "\n".join(
            f"QuotaShare: {name}"
            + "".join(f"\n  -> {d['jobName']}: {d['status']}" for d in details)
            for name, details in jobs_by_qs.items()
        ),
    )
    return jobs_by_qs
