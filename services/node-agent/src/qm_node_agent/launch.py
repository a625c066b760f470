"""What to run for one host's part of an attempt, read from the folded job (pure)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from qm_node_agent.contract import Contract, build_contract
from qm_node_agent.contract.spec import payload_mapping
from qm_node_agent.errors import LaunchError
from quartermaster.core import Job
from quartermaster.objectstore import S3Access

CACHE_ENV = "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"
ML_DIR = "/opt/ml"  # where the job sees its contract's tree
HOSTS_FILE = "/etc/hosts"  # where it sees its hosts file (and the host has its own)


class LaunchSpec(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    attempt: int
    host: str
    chain_id: str
    image: str
    entrypoint: tuple[str, ...]
    arguments: tuple[str, ...]
    environment: dict[str, str]  # everything but the cache path, which depends on the runtime
    cache_dir: Path  # on the host
    work_dir: Path
    gpu_indexes: tuple[int, ...]
    contract: Contract
    access: S3Access | None = None  # the job's role's object-store credentials
    addresses: dict[str, str] = msgspec.field(default_factory=dict)  # gang host -> address
    network_interface: str = "eth0"  # resourceconfig.json's network_interface_name
    volume_size_gb: int = 0
    keep_warm: bool = False  # the job may leave its host in a warm pool (keep-alive > 0)

    @property
    def command(self) -> tuple[str, ...]:
        return self.entrypoint + self.arguments

    def environment_with_cache(self, cache_path: str) -> dict[str, str]:
        return {**self.environment, CACHE_ENV: cache_path}


def build_spec(
    job: Job,
    *,
    host: str,
    instance_type: str,
    gpu_indexes: tuple[int, ...],
    cache_dir: Path,
    work_dir: Path,
    ml_dir: Path,
    hosts_file: Path,
    access_for: Callable[[str], S3Access | None] = lambda _role: None,
    addresses: dict[str, str] | None = None,
    network_interface: str = "eth0",
) -> LaunchSpec:
    """Raises `LaunchError` (CLIENT_ERROR) when the payload cannot describe a run.

    `access_for`: the credentials an execution role maps to (None: it gets none)."""
    payload = _payload(job.payload)
    algorithm = payload_mapping(payload.get("AlgorithmSpecification"), "AlgorithmSpecification")
    image = algorithm.get("TrainingImage") or ""
    if not isinstance(image, str):
        raise LaunchError.client("AlgorithmSpecification.TrainingImage must be a string")
    user_env = payload_mapping(payload.get("Environment"), "Environment")
    visible = ",".join(str(index) for index in gpu_indexes)
    contract = build_contract(
        job,
        payload,
        host=host,
        instance_type=instance_type,
        ml_dir=str(ml_dir),
        hosts_file=str(hosts_file),
    )
    access = access_for(contract.outputs.role_arn) if contract.outputs.role_arn else None
    environment = {str(name): _text(value) for name, value in user_env.items()}
    if access is not None:
        environment.update(access.environment())
    environment.update(contract.environment())
    environment.update(
        {
            "SM_HOSTS": json.dumps(list(contract.hosts)),
            "SM_CURRENT_HOST": contract.current_host,
            "QM_HOST": host,
            "SM_CURRENT_INSTANCE_TYPE": instance_type,
            "SM_NUM_GPUS": str(len(gpu_indexes)),
            "CUDA_VISIBLE_DEVICES": visible,
            "NVIDIA_VISIBLE_DEVICES": visible,
            "QM_JOB_ID": job.job_id,
            "QM_ATTEMPT": str(job.attempt_no),
        }
    )
    return LaunchSpec(
        job_id=job.job_id,
        attempt=job.attempt_no,
        host=host,
        chain_id=job.chain_id,
        image=image,
        entrypoint=_strings(algorithm.get("ContainerEntrypoint"), "ContainerEntrypoint"),
        arguments=_strings(algorithm.get("ContainerArguments"), "ContainerArguments"),
        environment=environment,
        cache_dir=cache_dir,
        work_dir=work_dir,
        gpu_indexes=gpu_indexes,
        contract=contract,
        access=access,
        addresses=addresses or {},
        network_interface=network_interface,
        volume_size_gb=_volume_size(payload.get("ResourceConfig")),
        keep_warm=job.keep_alive_seconds > 0,
    )


def _volume_size(value: object) -> int:
    size = payload_mapping(value, "ResourceConfig").get("VolumeSizeInGB", 0)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise LaunchError.client("ResourceConfig.VolumeSizeInGB must be a non-negative integer")
    return size


def _payload(raw: str) -> dict[str, Any]:
    try:
        payload = json.loads(raw or "{}")
    except json.JSONDecodeError as err:
        raise LaunchError.client(f"serviceRequestPayload is not JSON ({err})") from err
    return payload_mapping(payload, "serviceRequestPayload")


def _strings(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise LaunchError.client(f"AlgorithmSpecification.{what} must be a list of strings")
    return tuple(value)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)
