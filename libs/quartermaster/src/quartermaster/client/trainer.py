"""A small trainer-like builder, shaped like the SageMaker SDK v3 `ModelTrainer`.

`TrainingQueue.submit` takes it (or a ready CreateTrainingJob payload dict): the
same constructor arguments a notebook passes (`training_image`, `source_code`,
`compute`, `stopping_condition`, `base_job_name`, ...) make the payload the SDK
would send. `SourceCode.command` is run with `sh -c`; `entry_script` with `python`.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from quartermaster.client.payload import input_channel

DEFAULT_ROLE = "arn:aws:iam::000000000000:role/quartermaster"


class SourceCode(msgspec.Struct, frozen=True, kw_only=True):
    """What to run: a shell `command`, or a Python `entry_script` (with `source_dir` as
    its working directory in the container, when given)."""

    command: str | None = None
    entry_script: str | None = None
    source_dir: str | None = None


class Compute(msgspec.Struct, frozen=True, kw_only=True):
    instance_type: str = "ml.g5.xlarge"
    instance_count: int = 1
    volume_size_in_gb: int = 30
    keep_alive_period_in_seconds: int | None = None


class StoppingCondition(msgspec.Struct, frozen=True, kw_only=True):
    max_runtime_in_seconds: int | None = None


def _channels(inputs: Any) -> list[dict[str, Any]]:
    """SDK `inputs`: None, an S3 URI (channel "training"), or {channel: URI}."""
    if inputs is None:
        return []
    named = {"training": inputs} if isinstance(inputs, str) else dict(inputs)
    return [input_channel(name, str(uri)) for name, uri in named.items()]


class ModelTrainer:
    """Builds the CreateTrainingJob request of a training job, as the SDK's ModelTrainer."""

    def __init__(
        self,
        training_image: str = "",
        source_code: SourceCode | None = None,
        base_job_name: str | None = None,
        compute: Compute | None = None,
        stopping_condition: StoppingCondition | None = None,
        role: str = DEFAULT_ROLE,
        environment: Mapping[str, str] | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        tags: Sequence[Mapping[str, str]] | None = None,
        training_input_mode: str = "File",
    ) -> None:
        self.training_image = training_image
        self.source_code = source_code or SourceCode()
        self.base_job_name = base_job_name or "training-job"
        self.compute = compute or Compute()
        self.stopping_condition = stopping_condition or StoppingCondition()
        self.role = role
        self.environment = dict(environment or {})
        self.hyperparameters = {k: str(v) for k, v in (hyperparameters or {}).items()}
        self.tags = [dict(t) for t in tags or ()]
        self.training_input_mode = training_input_mode

    def command(self) -> list[str]:
        code = self.source_code
        if code.command:
            return ["sh", "-c", code.command]
        if code.entry_script:
            script = code.entry_script
            return (
                ["sh", "-c", f'cd "{code.source_dir}" && exec python "{script}"']
                if (code.source_dir)
                else ["python", script]
            )
        return []

    def training_job_payload(self, inputs: Any = None) -> dict[str, Any]:
        """The CreateTrainingJob request (TrainingJobName: base name plus a timestamp)."""
        command = self.command()
        resources: dict[str, Any] = {
            "InstanceType": self.compute.instance_type,
            "InstanceCount": self.compute.instance_count,
            "VolumeSizeInGB": self.compute.volume_size_in_gb,
        }
        if self.compute.keep_alive_period_in_seconds is not None:
            resources["KeepAlivePeriodInSeconds"] = self.compute.keep_alive_period_in_seconds
        payload: dict[str, Any] = {
            "TrainingJobName": f"{self.base_job_name}-{_timestamp()}",
            "AlgorithmSpecification": {
                "TrainingImage": self.training_image,
                "TrainingInputMode": self.training_input_mode,
                "ContainerEntrypoint": command[:1],
                "ContainerArguments": command[1:],
            },
            "RoleArn": self.role,
            "ResourceConfig": resources,
            "Environment": dict(self.environment),
            "HyperParameters": dict(self.hyperparameters),
        }
        if self.stopping_condition.max_runtime_in_seconds is not None:
            payload["StoppingCondition"] = {
                "MaxRuntimeInSeconds": self.stopping_condition.max_runtime_in_seconds
            }
        channels = _channels(inputs)
        if channels:
            payload["InputDataConfig"] = channels
        if self.tags:
            payload["Tags"] = [dict(t) for t in self.tags]
        return payload


def _timestamp() -> str:
    """As the SDK names jobs: YYYY-MM-DD-HH-MM-SS-mmm (UTC)."""
    now = time.time()
    return time.strftime("%Y-%m-%d-%H-%M-%S", time.gmtime(now)) + f"-{int(now * 1000) % 1000:03d}"


def trainer_from_payload(payload: Mapping[str, Any]) -> ModelTrainer:
    """The builder a CreateTrainingJob payload came from (as the SDK's `get_model_trainer`
    rebuilds a ModelTrainer from the training job)."""
    spec = payload.get("AlgorithmSpecification") or {}
    command = [*spec.get("ContainerEntrypoint", ()), *spec.get("ContainerArguments", ())]
    code = (
        SourceCode(command=command[2])
        if command[:2] == ["sh", "-c"] and len(command) == 3
        else (SourceCode(command=shlex.join(command)) if command else SourceCode())
    )
    resources = payload.get("ResourceConfig") or {}
    stopping = payload.get("StoppingCondition") or {}
    name = str(payload.get("TrainingJobName") or "training-job")
    return ModelTrainer(
        training_image=str(spec.get("TrainingImage", "")),
        source_code=code,
        base_job_name=_BASE_NAME.sub("", name),
        compute=Compute(
            instance_type=str(resources.get("InstanceType", "ml.g5.xlarge")),
            instance_count=int(resources.get("InstanceCount", 1)),
            volume_size_in_gb=int(resources.get("VolumeSizeInGB", 30)),
            keep_alive_period_in_seconds=resources.get("KeepAlivePeriodInSeconds"),
        ),
        stopping_condition=StoppingCondition(
            max_runtime_in_seconds=stopping.get("MaxRuntimeInSeconds")
        ),
        role=str(payload.get("RoleArn") or DEFAULT_ROLE),
        environment=payload.get("Environment") or {},
        hyperparameters=payload.get("HyperParameters") or {},
        tags=[t for t in payload.get("Tags") or () if not str(t.get("Key", "")).startswith("aws:")],
        training_input_mode=str(spec.get("TrainingInputMode", "File")),
    )


# The timestamp `training_job_payload` (and the SDK) appends to the base job name.
_BASE_NAME = re.compile(r"-(\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-\d{3}|\d{6}-\d{4})$")
