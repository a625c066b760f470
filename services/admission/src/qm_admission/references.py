"""ARNs where AWS takes them in place of ids: a job ARN for a job id, a quota share's ARN.

Resolved in place on the request before its servicer reads it (`screening`), so every
RPC with a `job_id`, `job_ids` or `quota_share_arn` field takes the ARN form. A
malformed ARN is INVALID_ARGUMENT on its field.
"""

from __future__ import annotations

from google.protobuf.message import Message

from qm_admission.errors import invalid
from qm_admission.names import check_name

JOB_FIELDS = ("job_id",)
JOB_LIST_FIELDS = ("job_ids",)
SHARE_ARN_FIELD = "quota_share_arn"


def _resource(field: str, value: str) -> str:
    """The resource part of an ARN (`arn:partition:service:region:account:resource`)."""
    parts = value.split(":", 5)
    if len(parts) != 6 or not parts[5]:
        raise invalid(field, f"{value!r} is not an ARN")
    return parts[5]


def job_id_of(field: str, value: str) -> str:
    """The job id a job id or job ARN names."""
    if not value.startswith("arn:"):
        return value
    kind, _, job_id = _resource(field, value).partition("/")
    if kind != "job" or not job_id or "/" in job_id:
        raise invalid(field, f"{value!r} is not a job ARN")
    return job_id


def share_of(field: str, value: str) -> tuple[str, str]:
    """(job queue, quota share) of a quota share ARN (`...:job-queue/Q/quota-share/S`)."""
    parts = _resource(field, value).split("/")
    if len(parts) != 4 or parts[0] != "job-queue" or parts[2] != "quota-share":
        raise invalid(field, f"{value!r} is not a quota share ARN")
    return check_name(field, parts[1]), check_name(field, parts[3])


def resolve(request: Message) -> None:
    """Replace job ARNs by job ids and spell a quota share ARN out as queue and name."""
    fields = request.DESCRIPTOR.fields_by_name
    for name in JOB_FIELDS:
        if name in fields and isinstance(getattr(request, name), str):
            setattr(request, name, job_id_of(name, getattr(request, name)))
    for name in JOB_LIST_FIELDS:
        if name in fields and fields[name].label == fields[name].LABEL_REPEATED:
            values = getattr(request, name)
            if any(isinstance(v, str) and v.startswith("arn:") for v in values):
                resolved = [job_id_of(f"{name}[{i}]", v) for i, v in enumerate(values)]
                del values[:]
                values.extend(resolved)
    if SHARE_ARN_FIELD in fields and getattr(request, SHARE_ARN_FIELD):
        queue, share = share_of(SHARE_ARN_FIELD, getattr(request, SHARE_ARN_FIELD))
        for name, value in (("job_queue", queue), ("quota_share_name", share)):
            given = getattr(request, name)
            if given and given.rsplit("/", 1)[-1] != value:
                raise invalid(name, f"{given!r} differs from the quota share ARN's {value!r}")
            setattr(request, name, value)
