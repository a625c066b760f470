"""AWS shapes both ways: protobuf answers as botocore-style dicts, SDK dicts as requests.

`aws_dict` renders any qm.v1 message as boto3 renders the AWS Batch output of the
same name: camelCase keys, string enum values without their type prefix
(`JOB_STATUS_RUNNING` -> `"RUNNING"`), epoch-millisecond integers, unset members
left out (but for those AWS always returns, `SHOWN_AT_ZERO`). New proto fields
appear without code here. `aws_output` adds the few answers whose top level AWS
shapes differently (DescribeServiceJob, DescribeQuotaShare, GetJobQueueSnapshot);
`listing` is a List/Describe output with every page's items.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

_JOB = frozenset(
    {"jobArn", "jobId", "jobName", "jobQueue", "status", "serviceJobType", "createdAt"}
)
# Members boto3 always shows (the output shapes' required members), even at zero, by
# message name. An enum's UNSPECIFIED is still left out: AWS has no value for it.
SHOWN_AT_ZERO: dict[str, frozenset[str]] = {
    "ServiceJobDetail": _JOB,
    "ServiceJobSummary": _JOB,
    "JobQueueDetail": frozenset({"jobQueueName", "jobQueueArn", "state", "priority"}),
    "ServiceEnvironmentDetail": frozenset(
        {"serviceEnvironmentName", "serviceEnvironmentArn", "capacityLimits"}
    ),
    "CapacityLimit": frozenset({"capacityUnit", "maxCapacity"}),
    "ServiceEnvironmentOrder": frozenset({"order", "serviceEnvironment"}),
    "ServiceJobRetryStrategy": frozenset({"attempts"}),
}


def _enum_prefix(enum: EnumDescriptor) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_text(enum: EnumDescriptor, number: int) -> str:
    """`"RUNNING"` for `JOB_STATUS_RUNNING`; `""` for an UNSPECIFIED (or unknown) value."""
    value = enum.values_by_number.get(number)
    if value is None:
        return ""
    text = value.name.removeprefix(_enum_prefix(enum))
    return "" if text == "UNSPECIFIED" else text


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return aws_dict(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return enum_text(field.enum_type, value)
    return value


def _is_collection(field: FieldDescriptor) -> bool:
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)  # a list, or a map


def _is_map(field: FieldDescriptor) -> bool:
    entry = field.message_type
    return entry is not None and entry.GetOptions().map_entry


def _queue_arn_of_share(out: dict[str, Any]) -> None:
    """AWS shows a share's queue by ARN (`jobQueueArn`): the share ARN's queue part."""
    share_arn = out.get("quotaShareArn", "")
    if "/quota-share/" in share_arn:
        out["jobQueueArn"] = share_arn.rsplit("/quota-share/", 1)[0]


# Members AWS shows that qm.v1 leaves to be derived, by message name.
_DERIVED: dict[str, Callable[[dict[str, Any]], None]] = {
    "QuotaShareDetail": _queue_arn_of_share,
}


def aws_dict(message: Message, always: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The message as a botocore-style dict (see the module docstring)."""
    name = message.DESCRIPTOR.name
    always = always | SHOWN_AT_ZERO.get(name, frozenset())
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        key = field.json_name
        value = getattr(message, field.name)
        if _is_map(field):
            shown: Any = {
                k: _value(field.message_type.fields_by_name["value"], v) for k, v in value.items()
            }
        elif field.label == FieldDescriptor.LABEL_REPEATED:
            shown = [_value(field, v) for v in value]
        elif field.has_presence:
            if message.HasField(field.name):  # set, even to zero: shown
                out[key] = _value(field, value)
            continue
        else:
            shown = _value(field, value)
        unset = field.type == FieldDescriptor.TYPE_ENUM and shown == ""
        if unset or (shown in ("", 0, False, [], {}) and key not in always):
            continue
        out[key] = shown
    derive = _DERIVED.get(name)
    if derive is not None:
        derive(out)
    return out


def job_detail(detail: pb.ServiceJobDetail) -> dict[str, Any]:
    """DescribeServiceJob's output as boto3 gives it (plus Quartermaster's extra members)."""
    out = aws_dict(detail)
    out.setdefault("attempts", [])
    out["isTerminated"] = bool(detail.is_terminated)
    out["schedulingPriority"] = int(detail.scheduling_priority)
    return out


def quota_share_detail(answer: pb.DescribeQuotaShareResponse) -> dict[str, Any]:
    """DescribeQuotaShare's output: the share's members at the top, as AWS has them,
    then Quartermaster's `oversubscribed` and `capacityUsage`."""
    extra = {k: v for k, v in aws_dict(answer).items() if k != "quotaShare"}
    return aws_dict(answer.quota_share) | extra


def job_queue_snapshot(snapshot: pb.GetJobQueueSnapshotResponse) -> dict[str, Any]:
    """GetJobQueueSnapshot's output from qm.v1's flatter answer.

    Each job keeps Quartermaster's members beside AWS's `jobArn` and
    `earliestTimeAtPosition`; a share's head job that is not in the front of the
    queue has only its `jobId` (the answer carries no more of it).
    """
    at = snapshot.last_updated_at
    front = [aws_dict(job) for job in snapshot.front_of_queue]
    by_id = {job.job_id: shown for job, shown in zip(snapshot.front_of_queue, front, strict=True)}

    def head(job_id: str) -> dict[str, Any]:
        return by_id.get(job_id) or ({"jobId": job_id} if job_id else {})

    shares = snapshot.quota_shares
    return {
        "frontOfQueue": {"jobs": front, "lastUpdatedAt": at},
        "frontOfQuotaShares": {
            "quotaShares": {s.quota_share_name: [head(i) for i in s.head_job_ids] for s in shares},
            "lastUpdatedAt": at,
        },
        "queueUtilization": {
            "totalCapacityUsage": [aws_dict(u) for u in snapshot.total_capacity_usage],
            "quotaShareUtilization": {
                "topCapacityUtilization": [
                    {
                        "quotaShareName": s.quota_share_name,
                        "capacityUsage": [aws_dict(u) for u in s.capacity_usage],
                    }
                    for s in shares
                ]
            },
            "lastUpdatedAt": at,
        },
        "jobQueueName": snapshot.job_queue_name,
    }


# Answers whose top level AWS shapes differently from the message, by message name.
_SHAPED: dict[str, Callable[[Any], dict[str, Any]]] = {
    "ServiceJobDetail": job_detail,
    "DescribeServiceJobResponse": lambda answer: job_detail(answer.job),
    "DescribeQuotaShareResponse": quota_share_detail,
    "GetJobQueueSnapshotResponse": job_queue_snapshot,
}


def aws_output(message: Message) -> dict[str, Any]:
    """A qm.v1 answer as the AWS Batch operation of the same name returns it; its lists
    and maps even when empty (`{"jobQueues": []}`, `{"tags": {}}`), as boto3 has them."""
    shape = _SHAPED.get(message.DESCRIPTOR.name)
    if shape is not None:
        return shape(message)
    fields = message.DESCRIPTOR.fields
    return aws_dict(message, frozenset(f.json_name for f in fields if _is_collection(f)))


def listing(key: str, items: Iterable[Message]) -> dict[str, list[dict[str, Any]]]:
    """A List/Describe output holding every page: `{"jobSummaryList": [...]}`, no nextToken."""
    return {key: [aws_output(item) for item in items]}


# ---- SDK dicts -> request fields ----------------------------------------------------


def _action(text: str) -> str:
    """`"RETRY"` -> the enum value's name (protobuf refuses unknown names with ValueError)."""
    return f"RETRY_ACTION_{text.upper()}"


def retry_strategy(config: Mapping[str, Any]) -> pb.ServiceJobRetryStrategy:
    """`{"attempts": 2, "evaluateOnExit": [{"action": "RETRY", "onStatusReason": "*"}]}`."""
    rules = [
        pb.ServiceJobEvaluateOnExit(
            action=_action(str(rule["action"])),
            on_status_reason=str(rule.get("onStatusReason", "")),
            on_exit_code=str(rule.get("onExitCode", "")),
            on_reason=str(rule.get("onReason", "")),
        )
        for rule in config.get("evaluateOnExit", ())
    ]
    return pb.ServiceJobRetryStrategy(
        attempts=int(config.get("attempts", 0)), evaluate_on_exit=rules
    )


def timeout_config(config: Mapping[str, Any]) -> pb.ServiceJobTimeout:
    """`{"attemptDurationSeconds": 3600}`."""
    return pb.ServiceJobTimeout(
        attempt_duration_seconds=int(config.get("attemptDurationSeconds", 0))
    )


def preemption_configuration(config: Mapping[str, Any]) -> pb.ServiceJobPreemptionConfiguration:
    """`{"preemptionRetriesBeforeTermination": 2}`."""
    out = pb.ServiceJobPreemptionConfiguration()
    retries = config.get("preemptionRetriesBeforeTermination")
    if retries is not None:
        out.preemption_retries_before_termination = int(retries)
    return out
