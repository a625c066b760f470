"""Each attempt of a service job is a SageMaker training job: its DescribeTrainingJob
and ListTrainingJobs shapes, read from the folded state (pure).

The name says which attempt it is (`core.training_job`: `<job name>-<first 8 of the
job id>-<attempt number>`), so nothing is stored to find it. What the job asked
for comes from its CreateTrainingJob payload as submitted; what happened comes from
the attempt: dispatched is Starting, its hosts starting is Downloading, running is
Training, and its end is Completed, Failed, or Stopped (Interrupted when it was
preempted). The warm pool belongs to the job's last attempt. Timestamps are epoch
seconds, as SageMaker's JSON protocol carries them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from qm_admission.errors import invalid, not_found
from quartermaster.core import State
from quartermaster.core.model import ACTIVE_STATUSES, Attempt, Job, JobStatus
from quartermaster.core.training_job import training_job_arn, training_job_name

Body = dict[str, Any]
_NAME = re.compile(r"^(?P<stem>.+)-(?P<prefix>[0-9a-f]{8})-(?P<attempt>[0-9]{1,9})$")
_PAYLOAD_MEMBERS = (
    "AlgorithmSpecification",
    "RoleArn",
    "HyperParameters",
    "InputDataConfig",
    "OutputDataConfig",
    "StoppingCondition",
    "CheckpointConfig",
    "Environment",
    "VpcConfig",
    "EnableNetworkIsolation",
    "EnableInterContainerTrafficEncryption",
    "EnableManagedSpotTraining",
    "RetryStrategy",
    "DebugHookConfig",
    "TensorBoardOutputConfig",
)
_START_PHASE = {
    JobStatus.SCHEDULED: ("Starting", "Launching ML instances"),
    JobStatus.STARTING: ("Downloading", "Preparing the instances and downloading input data"),
    JobStatus.RUNNING: ("Training", "Training in progress"),
}


def find(state: State, name: str) -> tuple[Job, Attempt]:
    """The job and attempt a training job name stands for (NOT_FOUND if none)."""
    match = _NAME.match(name) if isinstance(name, str) else None
    if match is None:
        raise invalid("TrainingJobName", f"{name!r} is not a training job name of this endpoint")
    prefix, number = match["prefix"], int(match["attempt"])
    for job_id, job in state.jobs.items():
        if not job_id.startswith(prefix):
            continue
        for attempt in job.attempts:
            if attempt.number == number and _name(job, attempt) == name:
                return job, attempt
    raise not_found("TrainingJobName", f"Requested resource not found: training job {name}")


def _name(job: Job, attempt: Attempt) -> str:
    return training_job_name(job.job_name, job.job_id, attempt.number)


def _payload(job: Job) -> Body:
    try:
        payload = json.loads(job.payload)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def is_latest(job: Job, attempt: Attempt) -> bool:
    return bool(job.attempts) and job.attempts[-1] is attempt


def is_live(job: Job, attempt: Attempt) -> bool:
    return is_latest(job, attempt) and job.status in ACTIVE_STATUSES


def status(job: Job, attempt: Attempt) -> tuple[str, str, str]:
    """(TrainingJobStatus, SecondaryStatus, FailureReason)."""
    if is_live(job, attempt):
        if job.stop_cause is not None:
            return "Stopping", "Stopping", ""
        return "InProgress", _START_PHASE[job.status][0], ""
    if attempt.seconds_at_risk is not None:
        return "Stopped", "Interrupted", ""
    if is_latest(job, attempt) and job.status is JobStatus.SUCCEEDED:
        return "Completed", "Completed", ""
    if is_latest(job, attempt) and job.is_terminated:
        return "Stopped", "Stopped", ""
    if attempt.exit_code == 0:
        return "Completed", "Completed", ""
    return "Failed", "Failed", attempt.status_reason or "the attempt ended without a reason"


def _transitions(job: Job, attempt: Attempt, final: str) -> list[Body]:
    steps: list[Body] = []
    starting: Body = {
        "Status": "Starting",
        "StartTime": attempt.dispatched_at,
        "StatusMessage": _START_PHASE[JobStatus.SCHEDULED][1],
    }
    steps.append(starting)
    if attempt.started_at is not None:
        starting["EndTime"] = attempt.started_at
        training: Body = {
            "Status": "Training",
            "StartTime": attempt.started_at,
            "StatusMessage": _START_PHASE[JobStatus.RUNNING][1],
        }
        steps.append(training)
    if attempt.stopped_at is not None:
        steps[-1]["EndTime"] = attempt.stopped_at
        steps.append(
            {
                "Status": final,
                "StartTime": attempt.stopped_at,
                "StatusMessage": attempt.status_reason or final,
            }
        )
    elif is_live(job, attempt) and job.status is JobStatus.STARTING:
        steps.append(
            {
                "Status": "Downloading",
                "StartTime": steps[-1]["StartTime"],
                "StatusMessage": _START_PHASE[JobStatus.STARTING][1],
            }
        )
    return steps


def warm_pool_status(state: State, job: Job, attempt: Attempt) -> Body | None:
    """SageMaker's WarmPoolStatus of the attempt (its job's last), if it left a pool."""
    pool = state.pools.get(job.job_id)
    if pool is None or not is_latest(job, attempt):
        return None
    out: Body = {"Status": pool.status.value}
    if pool.status.value in ("Reused", "Terminated"):
        out["ResourceRetainedBillableTimeInSeconds"] = pool.billable_seconds
    reuser = state.jobs.get(pool.reused_by_job or "")
    if reuser is not None and reuser.attempts:
        since = pool.available_since or 0.0
        taking = next((a for a in reuser.attempts if a.dispatched_at >= since), reuser.attempts[0])
        out["ReusedByJob"] = _name(reuser, taking)
    return out


def _seconds(attempt: Attempt) -> int:
    if attempt.started_at is None or attempt.stopped_at is None:
        return 0
    return max(0, round(attempt.stopped_at - attempt.started_at))


def describe(state: State, job: Job, attempt: Attempt) -> Body:
    """DescribeTrainingJob's output for one attempt."""
    payload = _payload(job)
    name = _name(job, attempt)
    job_status, secondary, failure = status(job, attempt)
    resource = dict(payload.get("ResourceConfig") or {})
    resource.setdefault("InstanceType", job.unit)
    resource.setdefault("InstanceCount", job.count)
    if job.keep_alive_seconds:
        resource["KeepAlivePeriodInSeconds"] = job.keep_alive_seconds
    out: Body = {
        "TrainingJobName": name,
        "TrainingJobArn": training_job_arn(name),
        "TrainingJobStatus": job_status,
        "SecondaryStatus": secondary,
        "ResourceConfig": resource,
        "CreationTime": attempt.dispatched_at,
        "LastModifiedTime": max(
            t for t in (attempt.dispatched_at, attempt.started_at, attempt.stopped_at) if t
        ),
        "SecondaryStatusTransitions": _transitions(job, attempt, secondary),
        "ModelArtifacts": {"S3ModelArtifacts": attempt.model_artifacts},
        "TrainingTimeInSeconds": _seconds(attempt),
        "BillableTimeInSeconds": _seconds(attempt) * job.count,
    }
    for member in _PAYLOAD_MEMBERS:
        if member in payload:
            out[member] = payload[member]
    if failure:
        out["FailureReason"] = failure
    if attempt.started_at is not None:
        out["TrainingStartTime"] = attempt.started_at
    if attempt.stopped_at is not None:
        out["TrainingEndTime"] = attempt.stopped_at
    pool = warm_pool_status(state, job, attempt)
    if pool is not None:
        out["WarmPoolStatus"] = pool
    return out


def summary(state: State, job: Job, attempt: Attempt) -> Body:
    """ListTrainingJobs' TrainingJobSummary of one attempt."""
    detail = describe(state, job, attempt)
    keys = (
        "TrainingJobName",
        "TrainingJobArn",
        "CreationTime",
        "TrainingEndTime",
        "LastModifiedTime",
        "TrainingJobStatus",
        "SecondaryStatus",
        "WarmPoolStatus",
    )
    return {k: detail[k] for k in keys if k in detail}


def attempts(state: State) -> Iterator[tuple[Job, Attempt]]:
    for job in state.jobs.values():
        for attempt in job.attempts:
            yield job, attempt


_STATUSES = ("InProgress", "Completed", "Failed", "Stopping", "Stopped")
_POOL_STATUSES = ("Available", "Terminated", "Reused", "InUse")
_SORT_KEYS = ("CreationTime", "Name", "Status")
_TIME_FILTERS = {
    "CreationTimeAfter": ("CreationTime", True),
    "CreationTimeBefore": ("CreationTime", False),
    "LastModifiedTimeAfter": ("LastModifiedTime", True),
    "LastModifiedTimeBefore": ("LastModifiedTime", False),
}


def _choice(data: Body, member: str, choices: tuple[str, ...], default: str | None) -> str | None:
    value = data.get(member, default)
    if value is not None and value not in choices:
        raise invalid(member, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


class ListQuery:
    """ListTrainingJobs' filters, sort and page size, checked."""

    def __init__(self, data: Body) -> None:
        known = {
            "MaxResults",
            "NextToken",
            "NameContains",
            "StatusEquals",
            "SortBy",
            "SortOrder",
            "WarmPoolStatusEquals",
            *_TIME_FILTERS,
        }
        for member in data:
            if member not in known:
                raise invalid(member, "is not a member of ListTrainingJobs' input")
        size = data.get("MaxResults", 10)
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 100:
            raise invalid("MaxResults", f"must be an integer 1-100, got {size!r}")
        self.max_results = size
        token = data.get("NextToken", "")
        name = data.get("NameContains", "")
        if not isinstance(token, str) or not isinstance(name, str):
            raise invalid(
                "NextToken" if not isinstance(token, str) else "NameContains", "must be a string"
            )
        self.next_token, self.name_contains = token, name.lower()
        self.status = _choice(data, "StatusEquals", _STATUSES, None)
        self.pool_status = _choice(data, "WarmPoolStatusEquals", _POOL_STATUSES, None)
        self.sort_by = _choice(data, "SortBy", _SORT_KEYS, "CreationTime")
        self.descending = _choice(data, "SortOrder", ("Ascending", "Descending"), "Ascending") == (
            "Descending"
        )
        self.times: list[tuple[str, bool, float]] = []
        for member, (key, after) in _TIME_FILTERS.items():
            if member in data:
                value = data[member]
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise invalid(member, "must be a timestamp (epoch seconds)")
                self.times.append((key, after, float(value)))

    @classmethod
    def parse(cls, data: Body) -> ListQuery:
        return cls(data)

    def _keeps(self, item: Body) -> bool:
        if self.name_contains and self.name_contains not in item["TrainingJobName"].lower():
            return False
        if self.status is not None and item["TrainingJobStatus"] != self.status:
            return False
        pool = item.get("WarmPoolStatus", {}).get("Status")
        if self.pool_status is not None and pool != self.pool_status:
            return False
        for key, after, at in self.times:
            value = item.get(key, 0.0)
            if (value <= at) if after else (value >= at):
                return False
        return True

    def page(
        self, state: State, attempts: Iterator[tuple[Job, Attempt]], offset: int
    ) -> tuple[list[Body], bool]:
        """The summaries from `offset`, and whether more follow."""
        items = [s for s in (summary(state, j, a) for j, a in attempts) if self._keeps(s)]
        field = {"Name": "TrainingJobName", "Status": "TrainingJobStatus"}.get(
            self.sort_by or "", "CreationTime"
        )
        items.sort(key=lambda s: (s[field], s["TrainingJobName"]), reverse=self.descending)
        chosen = items[offset : offset + self.max_results]
        return chosen, offset + len(chosen) < len(items)
