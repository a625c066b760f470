"""`TrainingQueue`, mirroring `sagemaker.train.aws_batch.training_queue` of SageMaker SDK v3.

The constructor and every method take the SDK's arguments in the SDK's order, so
a notebook written for the SDK runs with only its imports changed. Differences:
`training_job` may also be a ready CreateTrainingJob payload dict; a `client=`
(else one from the environment, see `quartermaster.client.connection`); `map`
submits in one SubmitServiceJobs call per 100 jobs; `dry_run(...)` writes
nothing and returns what the scheduling pass would do; `client_token=`.
Quartermaster queues are quota-managed: `share_identifier` (fair-share queues)
is refused with ValueError.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client.connection import Quartermaster, QuartermasterError, default_client
from quartermaster.client.queued_job import TrainingQueuedJob
from quartermaster.client.shapes import (
    enum_text,
    preemption_configuration,
    retry_strategy,
    timeout_config,
)

log = logging.getLogger(__name__)

SAGEMAKER_TRAINING = "SAGEMAKER_TRAINING"
JOB_STATUS_RUNNING = "RUNNING"
# As the SDK sends them when the caller gives none (constants.py of sagemaker.train.aws_batch).
DEFAULT_TIMEOUT: dict[str, Any] = {"attemptDurationSeconds": 86400}
DEFAULT_RETRY_CONFIG: dict[str, Any] = {
    "attempts": 1,
    "evaluateOnExit": [
        {
            "action": "RETRY",
            "onStatusReason": "Received status from SageMaker:InternalServerError: "
            "We encountered an internal error. Please try again.",
        },
        {"action": "EXIT", "onStatusReason": "*"},
    ],
}
MAP_CHUNK = 100
# AWS Batch's PENDING (waiting on dependencies): Quartermaster jobs have none.
NEVER_HELD = frozenset({"PENDING"})


def status_name(value: int) -> str:
    """`"RUNNING"` for `pb.JOB_STATUS_RUNNING` (a job status as the AWS API spells it)."""
    return enum_text(pb.JobStatus.DESCRIPTOR, value)


@runtime_checkable
class TrainerLike(Protocol):
    """A builder of CreateTrainingJob payloads (`quartermaster.client.ModelTrainer`)."""

    def training_job_payload(self, inputs: Any = None) -> dict[str, Any]: ...


def _payload(training_job: TrainerLike | Mapping[str, Any], inputs: Any) -> dict[str, Any]:
    if isinstance(training_job, TrainerLike):
        return training_job.training_job_payload(inputs)
    if isinstance(training_job, Mapping):
        copied: dict[str, Any] = json.loads(json.dumps(training_job))  # tags are popped from it
        return copied
    raise TypeError(
        "training_job must be a ModelTrainer (quartermaster.client.ModelTrainer) or a "
        f"CreateTrainingJob payload dict, but got {type(training_job)}"
    )


def _merge_tags(
    tags: Mapping[str, str] | None, payload_tags: Sequence[Mapping[str, str]] | None
) -> dict[str, str]:
    """The job's tags with the payload's `Tags` merged in (those win, as in the SDK)."""
    merged = dict(tags or {})
    merged.update({t["Key"]: t["Value"] for t in payload_tags or ()})
    return merged


def _share(share_identifier: str | None, quota_share_name: str | None) -> str:
    if share_identifier is not None and quota_share_name is not None:
        raise ValueError(
            "Either share_identifier or quota_share_name can be specified, but not both"
        )
    if share_identifier is not None:
        raise ValueError(
            "share_identifier is for fair-share queues; Quartermaster queues are "
            "quota-managed: give quota_share_name"
        )
    return quota_share_name or ""


class TrainingQueue:
    """A job queue seen from the submitter's side."""

    def __init__(self, queue_name: str, client: Quartermaster | None = None) -> None:
        self.queue_name = queue_name
        self.client = client or default_client()

    @property
    def name(self) -> str:
        return self.queue_name

    def _request(
        self,
        training_job: TrainerLike | Mapping[str, Any],
        inputs: Any,
        job_name: str | None,
        retry_config: Mapping[str, Any] | None,
        priority: int | None,
        share_identifier: str | None,
        timeout: Mapping[str, Any] | None,
        tags: Mapping[str, str] | None,
        quota_share_name: str | None,
        preemption_config: Mapping[str, Any] | None,
        client_token: str = "",
    ) -> pb.SubmitServiceJobRequest:
        share = _share(share_identifier, quota_share_name)
        payload = _payload(training_job, inputs)
        payload_tags = payload.pop("Tags", None)
        name = job_name or payload.get("TrainingJobName")
        if not name:
            raise ValueError("job_name: give one, or a payload with a TrainingJobName")
        request = pb.SubmitServiceJobRequest(
            job_name=name,
            job_queue=self.queue_name,
            quota_share_name=share,
            service_job_type=SAGEMAKER_TRAINING,
            service_request_payload=json.dumps(payload),
            scheduling_priority=priority or 0,
            retry_strategy=retry_strategy(retry_config or DEFAULT_RETRY_CONFIG),
            timeout_config=timeout_config(timeout or DEFAULT_TIMEOUT),
            tags=_merge_tags(tags, payload_tags),
            client_token=client_token,
        )
        if preemption_config:
            request.preemption_configuration.CopyFrom(preemption_configuration(preemption_config))
        return request

    def _queued(self, reply: Any, share: str | None) -> TrainingQueuedJob:
        return TrainingQueuedJob(
            reply.job_arn or reply.job_id, reply.job_name, None, share, client=self.client
        )

    def submit(
        self,
        training_job: TrainerLike | Mapping[str, Any],
        inputs: Any = None,
        job_name: str | None = None,
        retry_config: Mapping[str, Any] | None = None,
        priority: int | None = None,
        share_identifier: str | None = None,
        timeout: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        quota_share_name: str | None = None,
        preemption_config: Mapping[str, Any] | None = None,
        *,
        client_token: str = "",
    ) -> TrainingQueuedJob:
        """Submit a job; returns its TrainingQueuedJob (job ARN and name).

        `retry_config`, `timeout` and `preemption_config` are the SDK's (and SubmitServiceJob's)
        dicts: `{"attempts": 2, "evaluateOnExit": [...]}`, `{"attemptDurationSeconds": 3600}`,
        `{"preemptionRetriesBeforeTermination": 1}`.
        """
        request = self._request(
            training_job,
            inputs,
            job_name,
            retry_config,
            priority,
            share_identifier,
            timeout,
            tags,
            quota_share_name,
            preemption_config,
            client_token,
        )
        reply = self.client.call(self.client.jobs.SubmitServiceJob, request)
        return self._queued(reply, quota_share_name)

    def dry_run(
        self,
        training_job: TrainerLike | Mapping[str, Any],
        inputs: Any = None,
        job_name: str | None = None,
        **options: Any,
    ) -> Any:
        """What the scheduling pass would do with this submission now (`DryRunResult`: would
        it start, on which hosts, whom it would preempt, or why it would wait); writes nothing.
        `options` are `submit`'s."""
        request = self._request(
            training_job,
            inputs,
            job_name,
            options.get("retry_config"),
            options.get("priority"),
            options.get("share_identifier"),
            options.get("timeout"),
            options.get("tags"),
            options.get("quota_share_name"),
            options.get("preemption_config"),
        )
        request.dry_run = True
        return self.client.call(self.client.jobs.SubmitServiceJob, request).dry_run_result

    def map(
        self,
        training_job: TrainerLike | Mapping[str, Any],
        inputs: Sequence[Any] | None = None,
        job_names: Sequence[str] | None = None,
        retry_config: Mapping[str, Any] | None = None,
        priority: int | None = None,
        share_identifier: str | None = None,
        timeout: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        quota_share_name: str | None = None,
    ) -> list[TrainingQueuedJob]:
        """One job per input (or per name when `inputs` is None), submitted in bulk."""
        if inputs is None:
            inputs = [None] * len(job_names or ())
        if job_names is not None and len(job_names) != len(inputs):
            raise ValueError(
                "When specified, the number of job names must match the number of inputs"
            )
        names: Sequence[str | None] = job_names if job_names is not None else [None] * len(inputs)
        requests = [
            self._request(
                training_job,
                value,
                name,
                retry_config,
                priority,
                share_identifier,
                timeout,
                tags,
                quota_share_name,
                None,
            )
            for value, name in zip(inputs, names, strict=True)
        ]
        jobs: list[TrainingQueuedJob] = []
        for start in range(0, len(requests), MAP_CHUNK):
            chunk = requests[start : start + MAP_CHUNK]
            reply = self.client.call(
                self.client.jobs.SubmitServiceJobs, pb.SubmitServiceJobsRequest(jobs=chunk)
            )
            for result in reply.results:
                if result.HasField("error"):
                    subject = chunk[result.index].job_name
                    raise QuartermasterError.from_api_error(result.error, subject)
                jobs.append(self._queued(result.job, quota_share_name))
        return jobs

    def _listed(self, status: str | None, **fields: Any) -> list[TrainingQueuedJob]:
        if status and status.upper() in NEVER_HELD:
            return []  # an AWS status no Quartermaster job is ever in
        return [
            TrainingQueuedJob(
                s.job_arn or s.job_id, s.job_name, None, s.quota_share_name, client=self.client
            )
            for s in self.client.list_jobs(self.queue_name, status, all_statuses=False, **fields)
        ]

    def list_jobs(
        self, job_name: str | None = None, status: str | None = JOB_STATUS_RUNNING
    ) -> list[TrainingQueuedJob]:
        """Jobs by name (then of any status, as in AWS), else by status."""
        if job_name:
            return self._listed(None, JOB_NAME=job_name)
        return self._listed(status)

    def list_jobs_by_share(
        self,
        status: str | None = JOB_STATUS_RUNNING,
        share_identifier: str | None = None,
        quota_share_name: str | None = None,
    ) -> list[TrainingQueuedJob]:
        """Jobs of one quota share with `status`."""
        share = _share(share_identifier, quota_share_name)
        return self._listed(status, quota_share_name=share)

    def get_job(self, job_name: str) -> TrainingQueuedJob:
        """The job named `job_name`; ValueError when there is none."""
        jobs = self.list_jobs(job_name)
        if not jobs:
            raise ValueError(f"Cannot find job: {job_name}")
        return jobs[0]
