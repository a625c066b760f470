"""Builds the SageMaker CreateTrainingJob-shaped payload a service job carries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def training_job(
    *,
    image: str = "",
    command: Sequence[str] = (),
    instance_type: str = "ml.g5.xlarge",
    instance_count: int = 1,
    keep_alive_seconds: int = 0,
    role_arn: str = "arn:aws:iam::000000000000:role/quartermaster",
    environment: dict[str, str] | None = None,
    max_runtime_seconds: int | None = None,
    volume_size_gb: int = 30,
    hyperparameters: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A training-job request: `command` is the container entrypoint plus its arguments."""
    payload: dict[str, Any] = {
        "AlgorithmSpecification": {
            "TrainingImage": image,
            "TrainingInputMode": "File",
            "ContainerEntrypoint": list(command[:1]),
            "ContainerArguments": list(command[1:]),
        },
        "RoleArn": role_arn,
        "ResourceConfig": {
            "InstanceType": instance_type,
            "InstanceCount": instance_count,
            "VolumeSizeInGB": volume_size_gb,
            "KeepAlivePeriodInSeconds": keep_alive_seconds,
        },
        "Environment": dict(environment or {}),
        "HyperParameters": dict(hyperparameters or {}),
    }
    if max_runtime_seconds is not None:
        payload["StoppingCondition"] = {"MaxRuntimeInSeconds": max_runtime_seconds}
    return payload
