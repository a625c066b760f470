"""ARNs of Quartermaster resources, shaped like AWS Batch's, and the names inside them."""

from __future__ import annotations

PREFIX = "arn:qm:batch:local:000000000000"


def job(job_id: str) -> str:
    return f"{PREFIX}:job/{job_id}"


def job_queue(name: str) -> str:
    return f"{PREFIX}:job-queue/{name}"


def quota_share(queue: str, name: str) -> str:
    return f"{PREFIX}:job-queue/{queue}/quota-share/{name}"


def service_environment(name: str) -> str:
    return f"{PREFIX}:service-environment/{name}"


def scheduling_policy(name: str) -> str:
    return f"{PREFIX}:scheduling-policy/{name}"


def name_of(reference: str) -> str:
    """The resource name of a name-or-ARN reference (the last path token of an ARN)."""
    if reference.startswith("arn:"):
        return reference.rsplit("/", 1)[-1]
    return reference
