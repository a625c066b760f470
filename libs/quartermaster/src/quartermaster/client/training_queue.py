"""`TrainingQueue` and `TrainingQueuedJob`, mirroring the SageMaker SDK's queue API."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal, overload

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client.connection import Quartermaster, QuartermasterError

TERMINAL = {pb.JOB_STATUS_SUCCEEDED, pb.JOB_STATUS_FAILED}


def status_name(value: int) -> str:
    return str(pb.JobStatus.Name(value)).removeprefix("JOB_STATUS_")


class TrainingQueuedJob:
    """A submitted job: describe it, re-prioritise, terminate, or wait for it."""

    def __init__(self, client: Quartermaster, job_id: str, job_name: str) -> None:
        self.client = client
        self.job_id = job_id
        self.job_name = job_name

    def __repr__(self) -> str:
        return f"TrainingQueuedJob({self.job_name!r}, {self.job_id!r})"

    def describe(self) -> Any:
        return self.client.describe_job(self.job_id)

    @property
    def status(self) -> str:
        return status_name(self.describe().status)

    def update(self, scheduling_priority: int) -> None:
        self.client.call(
            self.client.jobs.UpdateServiceJob,
            pb.UpdateServiceJobRequest(job_id=self.job_id, scheduling_priority=scheduling_priority),
        )

    def terminate(self, reason: str = "Terminated by the user") -> None:
        self.client.call(
            self.client.jobs.TerminateServiceJob,
            pb.TerminateServiceJobRequest(job_id=self.job_id, reason=reason),
        )

    def wait(self, timeout: float = 300.0, until: Iterable[str] = ("SUCCEEDED", "FAILED")) -> Any:
        """Block until the job reaches one of `until` (streamed, no polling); return its detail."""
        wanted = {pb.JobStatus.Value(f"JOB_STATUS_{s}") for s in until}
        deadline = time.monotonic() + timeout
        detail = self.describe()
        while detail.status not in wanted:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.job_name} still {status_name(detail.status)}")
            for change in self.client.watch(job_ids=[self.job_id], timeout=left):
                if change.status in wanted:
                    break
            detail = self.describe()
        return detail


class TrainingQueue:
    """A job queue seen from the submitter's side."""

    def __init__(self, name: str, client: Quartermaster | None = None) -> None:
        self.name = name
        self.client = client or Quartermaster()

    def _request(
        self,
        training_job: Mapping[str, Any],
        job_name: str,
        quota_share_name: str,
        priority: int = 0,
        retry_attempts: int | None = None,
        evaluate_on_exit: Iterable[Mapping[str, str]] = (),
        preemption_retries: int | None = None,
        timeout_seconds: int | None = None,
        tags: Mapping[str, str] | None = None,
        client_token: str = "",
    ) -> pb.SubmitServiceJobRequest:
        request = pb.SubmitServiceJobRequest(
            job_name=job_name,
            job_queue=self.name,
            quota_share_name=quota_share_name,
            service_job_type="SAGEMAKER_TRAINING",
            service_request_payload=json.dumps(dict(training_job)),
            scheduling_priority=priority,
            tags=dict(tags or {}),
            client_token=client_token,
        )
        if retry_attempts is not None:
            request.retry_strategy.attempts = retry_attempts
            for rule in evaluate_on_exit:
                request.retry_strategy.evaluate_on_exit.add(
                    action=pb.RetryAction.Value(f"RETRY_ACTION_{rule['action'].upper()}"),
                    on_status_reason=rule.get("on_status_reason", ""),
                    on_exit_code=rule.get("on_exit_code", ""),
                )
        if preemption_retries is not None:
            request.preemption_configuration.preemption_retries_before_termination = (
                preemption_retries
            )
        if timeout_seconds is not None:
            request.timeout_config.attempt_duration_seconds = timeout_seconds
        return request

    @overload
    def submit(
        self,
        training_job: Mapping[str, Any],
        job_name: str,
        quota_share_name: str,
        *,
        dry_run: Literal[False] = False,
        **options: Any,
    ) -> TrainingQueuedJob: ...

    @overload
    def submit(
        self,
        training_job: Mapping[str, Any],
        job_name: str,
        quota_share_name: str,
        *,
        dry_run: Literal[True],
        **options: Any,
    ) -> Any: ...

    def submit(
        self,
        training_job: Mapping[str, Any],
        job_name: str,
        quota_share_name: str,
        *,
        dry_run: bool = False,
        **options: Any,
    ) -> TrainingQueuedJob | Any:
        """Submit the job; with `dry_run=True` submit nothing and return the `DryRunResult`:
        would it start now (on which hosts, on a warm pool), whom it would preempt, or why
        it would wait."""
        request = self._request(training_job, job_name, quota_share_name, **options)
        request.dry_run = dry_run
        response = self.client.call(self.client.jobs.SubmitServiceJob, request)
        if dry_run:
            return response.dry_run_result
        return TrainingQueuedJob(self.client, response.job_id, response.job_name)

    def map(
        self,
        training_job: Mapping[str, Any],
        job_names: Iterable[str],
        quota_share_name: str,
        **options: Any,
    ) -> list[TrainingQueuedJob]:
        """Submit one job per name in a single call (bulk: one log append)."""
        names = list(job_names)
        requests = [self._request(training_job, n, quota_share_name, **options) for n in names]
        response = self.client.call(
            self.client.jobs.SubmitServiceJobs, pb.SubmitServiceJobsRequest(jobs=requests)
        )
        jobs = []
        for result in response.results:
            if result.HasField("error"):
                raise QuartermasterError.from_api_error(result.error, names[result.index])
            jobs.append(TrainingQueuedJob(self.client, result.job.job_id, result.job.job_name))
        return jobs

    def list_jobs(self, status: str | None = None) -> list[Any]:
        return self.client.list_jobs(self.name, status)
