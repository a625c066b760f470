"""Builds the SageMaker CreateTrainingJob-shaped payload a service job carries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    channels: Mapping[str, str] | None = None,
    output_path: str | None = None,
    checkpoint_s3_uri: str | None = None,
    checkpoint_local_path: str | None = None,
) -> dict[str, Any]:
    """A training-job request: `command` is the container entrypoint plus its arguments;
    `channels`: {name: URI} (s3://, file:// or a host path), each staged into
    /opt/ml/input/data/<name>; `output_path`: the S3OutputPath of the model."""
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
    if channels:
        payload["InputDataConfig"] = [input_channel(name, uri) for name, uri in channels.items()]
    if output_path:
        payload["OutputDataConfig"] = {"S3OutputPath": output_path}
    if checkpoint_s3_uri:
        checkpoint = {"S3Uri": checkpoint_s3_uri}
        if checkpoint_local_path:
            checkpoint["LocalPath"] = checkpoint_local_path
        payload["CheckpointConfig"] = checkpoint
    return payload


def input_channel(name: str, uri: str) -> dict[str, Any]:
    """One InputDataConfig channel (File mode, every host gets all of it)."""
    return {
        "ChannelName": name,
        "InputMode": "File",
        "DataSource": {
            "S3DataSource": {
                "S3DataType": "S3Prefix",
                "S3Uri": uri,
                "S3DistributionType": "FullyReplicated",
            }
        },
    }
