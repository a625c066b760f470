"""Resource names and ARNs: the name rule, the ARN form, and name-or-ARN references."""

from __future__ import annotations

import re
from enum import StrEnum

from qm_admission.errors import invalid
from quartermaster.store import arns

NAME_RULE = "1-128 characters of [A-Za-z0-9_-]"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")


class Kind(StrEnum):
    """The resource type part of an ARN (`<prefix>:<kind>/<name>`, see `store.arns`)."""

    SERVICE_ENVIRONMENT = "service-environment"
    SCHEDULING_POLICY = "scheduling-policy"
    JOB_QUEUE = "job-queue"
    JOB = "job"


_ARN = {
    Kind.SERVICE_ENVIRONMENT: arns.service_environment,
    Kind.SCHEDULING_POLICY: arns.scheduling_policy,
    Kind.JOB_QUEUE: arns.job_queue,
    Kind.JOB: arns.job,
}


def arn(kind: Kind, name: str) -> str:
    return _ARN[kind](name)


def share_arn(queue: str, share: str) -> str:
    return arns.quota_share(queue, share)


def is_name(value: str) -> bool:
    return _NAME.fullmatch(value) is not None


def check_name(field: str, value: str) -> str:
    """`value` if it is a valid resource name, else INVALID_ARGUMENT on `field`."""
    if not is_name(value):
        raise invalid(field, f"must be {NAME_RULE}, got {value!r}")
    return value


def reference(field: str, value: str, kind: Kind) -> str:
    """The name a request's name-or-ARN `value` refers to; INVALID_ARGUMENT if malformed."""
    if not value:
        raise invalid(field, "is required")
    if value.startswith("arn:"):
        parts = value.split(":", 5)
        resource = parts[5] if len(parts) == 6 else ""
        found_kind, _, name = resource.partition("/")
        if found_kind != kind.value:
            raise invalid(field, f"{value!r} is not a {kind.value} ARN")
        value = name
    return check_name(field, value)
