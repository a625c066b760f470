"""`TrainingQueuedJob`: one submitted job, as the SageMaker SDK v3 shapes it.

`describe()` returns DescribeServiceJob's output as boto3 gives it (camelCase,
string statuses); `wait` follows the job's changes on a `WatchServiceJobs`
stream rather than polling every 5 s as the SDK does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client.connection import Quartermaster, default_client
from quartermaster.client.exceptions import NoTrainingJob
from quartermaster.client.shapes import enum_text, job_detail
from quartermaster.client.trainer import ModelTrainer, trainer_from_payload

log = logging.getLogger(__name__)

JOB_STATUS_COMPLETED = "SUCCEEDED"
JOB_STATUS_FAILED = "FAILED"
TERMINAL = frozenset({JOB_STATUS_COMPLETED, JOB_STATUS_FAILED})
# Statuses before any attempt started: no training job yet (the SDK's set).
NO_TRAINING_JOB = frozenset({"SUBMITTED", "PENDING", "RUNNABLE"})
RECHECK_SECONDS = 5.0
STATUS_NAMES = pb.JobStatus.DESCRIPTOR.values_by_name


def job_id_of(job_arn: str) -> str:
    """A job's id from its ARN (`arn:...:job/<id>`); an id is returned as it is."""
    return job_arn.rpartition("/")[2] if job_arn.startswith("arn:") else job_arn


class TrainingQueuedJob:
    """A submitted job: describe it, re-prioritise, terminate, or wait for it."""

    def __init__(
        self,
        job_arn: str,
        job_name: str,
        share_identifier: str | None = None,
        quota_share_name: str | None = None,
        *,
        client: Quartermaster | None = None,
    ) -> None:
        self.job_arn = job_arn
        self.job_name = job_name
        self.share_identifier = share_identifier
        self.quota_share_name = quota_share_name
        self.client = client or default_client()

    def __repr__(self) -> str:
        return f"TrainingQueuedJob({self.job_arn!r}, {self.job_name!r})"

    @property
    def job_id(self) -> str:
        return job_id_of(self.job_arn)

    def describe(self) -> dict[str, Any]:
        """DescribeServiceJob's output: jobArn, jobName, status, statusReason, attempts, ..."""
        return job_detail(self.client.describe_job(self.job_id))

    @property
    def status(self) -> str:
        return enum_text(pb.JobStatus.DESCRIPTOR, self.client.describe_job(self.job_id).status)

    def update(self, scheduling_priority: int) -> dict[str, Any]:
        """Change the priority; returns `{"jobArn", "jobName", "jobId"}`."""
        reply = self.client.call(
            self.client.jobs.UpdateServiceJob,
            pb.UpdateServiceJobRequest(job_id=self.job_id, scheduling_priority=scheduling_priority),
        )
        return {"jobArn": reply.job_arn, "jobName": reply.job_name, "jobId": reply.job_id}

    def terminate(self, reason: str | None = "Default terminate reason") -> None:
        self.client.call(
            self.client.jobs.TerminateServiceJob,
            pb.TerminateServiceJobRequest(job_id=self.job_id, reason=reason or ""),
        )

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until the job SUCCEEDED or FAILED, or `timeout` seconds passed (then the job
        is still running, as the SDK does, and its current description is returned)."""
        try:
            self.wait_for_status(TERMINAL, timeout)
        except TimeoutError:
            log.info("Timeout exceeded: %s seconds elapsed. Returning current results", timeout)
        return self.describe()

    def wait_for_status(self, statuses: Iterable[str], timeout: float | None = None) -> str:
        """Block until the job's status is one of `statuses` (returned); TimeoutError when
        `timeout` seconds pass first. Follows a WatchServiceJobs stream, and reads the job
        again at least every few seconds (a change just before the stream began is not on it)."""
        wanted = frozenset(statuses)
        deadline = None if timeout is None else time.monotonic() + timeout
        status = self.status
        while status not in wanted:
            left = RECHECK_SECONDS if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.job_name} is {status}, not one of {sorted(wanted)}")
            for change in self.client.watch(
                job_ids=[self.job_id],
                timeout=min(left, RECHECK_SECONDS),
                statuses=[s for s in wanted if f"JOB_STATUS_{s}" in STATUS_NAMES],
            ):
                if enum_text(pb.JobStatus.DESCRIPTOR, change.status) in wanted:
                    break
            status = self.status
        return status

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """The description once SUCCEEDED; RuntimeError(statusReason) if FAILED,
        TimeoutError if neither within `timeout`."""
        detail = self.wait(timeout)
        if detail["status"] == JOB_STATUS_COMPLETED:
            return detail
        if detail["status"] == JOB_STATUS_FAILED:
            raise RuntimeError(detail.get("statusReason", ""))
        raise TimeoutError("Reached timeout before the Batch job reached a terminal status")

    async def fetch_job_results(self, timeout: float | None = None) -> dict[str, Any]:
        """`result` for asyncio code (the blocking wait runs in a thread)."""
        return await asyncio.to_thread(self.result, timeout)

    def get_model_trainer(self) -> ModelTrainer:
        """The trainer the job was submitted with, once an attempt started; NoTrainingJob
        while it waits in the queue (then the attempts' reasons are logged)."""
        detail = self.describe()
        if detail["status"] in NO_TRAINING_JOB:
            for number, attempt in enumerate(detail.get("attempts", ()), start=1):
                if attempt.get("statusReason"):
                    log.info("Attempt %d - %s", number, attempt["statusReason"])
            raise NoTrainingJob("No Training job created. Job is still waiting in queue")
        return trainer_from_payload(json.loads(detail.get("serviceRequestPayload") or "{}"))
