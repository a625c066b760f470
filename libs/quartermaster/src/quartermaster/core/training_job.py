"""Each attempt of a job is a SageMaker training job: its name and ARN (pure).

The name is derived from the job, so every part (the node agent that sets
TRAINING_JOB_NAME, the API that shows it, the output path of its model) finds the
same one without it being stored: `<job name>-<first 8 of the job id>-<attempt>`,
cut to SageMaker's 63 characters and its alphabet (`[a-zA-Z0-9](-*[a-zA-Z0-9])*`).
"""

from __future__ import annotations

import re

MAX_NAME = 63
DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "000000000000"
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9-]+")
_DASHES = re.compile(r"-{2,}")


def training_job_name(job_name: str, job_id: str, attempt: int) -> str:
    suffix = f"-{job_id[:8]}-{attempt}"
    stem = _DASHES.sub("-", _NOT_ALLOWED.sub("-", job_name)).strip("-") or "job"
    return stem[: MAX_NAME - len(suffix)].rstrip("-") + suffix


def training_job_arn(
    name: str, region: str = DEFAULT_REGION, account: str = DEFAULT_ACCOUNT
) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{name}"
