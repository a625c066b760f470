"""AWS shapes both ways: protobuf answers as botocore-style dicts, SDK dicts as requests.

`aws_dict` renders any qm.v1 message as boto3 renders the AWS Batch output of the
same name: camelCase keys, string enum values without their type prefix
(`JOB_STATUS_RUNNING` -> `"RUNNING"`), epoch-millisecond integers, unset members
left out. New proto fields appear without code here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

# Members boto3 always shows for a job, even at their zero value.
ALWAYS_SHOWN = frozenset(
    {"jobArn", "jobId", "jobName", "jobQueue", "status", "serviceJobType", "createdAt"}
)


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


def _is_map(field: FieldDescriptor) -> bool:
    entry = field.message_type
    return entry is not None and entry.GetOptions().map_entry


def aws_dict(message: Message, always: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The message as a botocore-style dict (see the module docstring)."""
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
        if shown in ("", 0, False, [], {}) and key not in always:
            continue
        out[key] = shown
    return out


def job_detail(detail: pb.ServiceJobDetail) -> dict[str, Any]:
    """DescribeServiceJob's output as boto3 gives it (plus Quartermaster's extra members)."""
    out = aws_dict(detail, ALWAYS_SHOWN)
    out.setdefault("attempts", [])
    out["isTerminated"] = bool(detail.is_terminated)
    out["schedulingPriority"] = int(detail.scheduling_priority)
    return out


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
