"""What to run for one host's part of an attempt, read from the folded job (pure)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import msgspec

from qm_node_agent.errors import LaunchError
from quartermaster.core import Job

CACHE_ENV = "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"
INPUT_DIR = "/opt/ml/input/data"  # where a container sees its channels
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class InputChannel(msgspec.Struct, frozen=True):
    """One `InputDataConfig` channel: staged from `source` (a host path) into INPUT_DIR/name."""

    name: str
    source: str


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
    inputs: tuple[InputChannel, ...] = ()
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
) -> LaunchSpec:
    """Raises `LaunchError` (CLIENT_ERROR) when the payload cannot describe a run."""
    payload = _payload(job.payload)
    algorithm = _mapping(payload.get("AlgorithmSpecification"), "AlgorithmSpecification")
    image = algorithm.get("TrainingImage") or ""
    if not isinstance(image, str):
        raise LaunchError.client("AlgorithmSpecification.TrainingImage must be a string")
    user_env = _mapping(payload.get("Environment"), "Environment")
    visible = ",".join(str(index) for index in gpu_indexes)
    environment = {str(name): _text(value) for name, value in user_env.items()}
    environment.update(
        {
            "SM_HOSTS": json.dumps(list(job.hosts)),
            "SM_CURRENT_HOST": host,
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
        inputs=_inputs(payload.get("InputDataConfig")),
        volume_size_gb=_volume_size(payload.get("ResourceConfig")),
        keep_warm=job.keep_alive_seconds > 0,
    )


def _inputs(value: object) -> tuple[InputChannel, ...]:
    """Channels from a local path or a file:// URI (`S3DataSource.S3Uri` or
    `FileSystemDataSource.DirectoryPath`); a host stages nothing from elsewhere."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise LaunchError.client("InputDataConfig must be a list")
    channels: dict[str, InputChannel] = {}
    for index, entry in enumerate(value):
        where = f"InputDataConfig[{index}]"
        channel = _mapping(entry, where)
        name = channel.get("ChannelName")
        if not isinstance(name, str) or not _CHANNEL_NAME.match(name) or name in (".", ".."):
            raise LaunchError.client(f"{where}.ChannelName must match [A-Za-z0-9._-]{{1,64}}")
        if name in channels:
            raise LaunchError.client(f"{where}.ChannelName {name!r} is given twice")
        source = _mapping(channel.get("DataSource"), f"{where}.DataSource")
        s3 = _mapping(source.get("S3DataSource"), f"{where}.DataSource.S3DataSource")
        fs = _mapping(
            source.get("FileSystemDataSource"), f"{where}.DataSource.FileSystemDataSource"
        )
        uri = s3.get("S3Uri") or fs.get("DirectoryPath")
        if not isinstance(uri, str) or not uri:
            raise LaunchError.client(
                f"{where}.DataSource needs S3DataSource.S3Uri or DirectoryPath"
            )
        channels[name] = InputChannel(name, _local_path(uri, where))
    return tuple(channels.values())


def _local_path(uri: str, where: str) -> str:
    if uri.startswith("file://"):
        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            raise LaunchError.client(f"{where}: {uri} names another host")
        path = unquote(parsed.path)
    else:
        path = uri
    if not path.startswith("/"):
        raise LaunchError.client(
            f"{where}: {uri} is not a local path or file:// URI (this host stages only those)"
        )
    return path


def _volume_size(value: object) -> int:
    size = _mapping(value, "ResourceConfig").get("VolumeSizeInGB", 0)
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise LaunchError.client("ResourceConfig.VolumeSizeInGB must be a non-negative integer")
    return size


def _payload(raw: str) -> dict[str, Any]:
    try:
        payload = json.loads(raw or "{}")
    except json.JSONDecodeError as err:
        raise LaunchError.client(f"serviceRequestPayload is not JSON ({err})") from err
    return _mapping(payload, "serviceRequestPayload")


def _mapping(value: object, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise LaunchError.client(f"{what} must be an object")
    return value


def _strings(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise LaunchError.client(f"AlgorithmSpecification.{what} must be a list of strings")
    return tuple(value)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)
