"""What the SageMaker training-job contract asks of one host's part of an attempt (pure).

Read from the folded job and its payload: the training job's name and ARN, the
gang as `algo-1`..`algo-N` with their addresses, the config files' contents, the
channels to stage and where outputs go. The runtimes (process and docker) and the
agent's attempt runner all take it from here; `stage.py` and `outputs.py` do the I/O.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

import msgspec

from qm_node_agent.contract.checkpoints import Checkpoints, checkpoints_of
from qm_node_agent.errors import LaunchError
from quartermaster.core import Job
from quartermaster.core.training_job import training_job_arn, training_job_name
from quartermaster.objectstore import parse_s3_uri

GROUP_NAME = "homogeneousCluster"
DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
INPUT_MODES = ("File", "FastFile")  # FastFile is staged as File
DATA_TYPES = ("S3Prefix", "ManifestFile")
DISTRIBUTIONS = ("FullyReplicated", "ShardedByS3Key")


class Channel(msgspec.Struct, frozen=True, kw_only=True):
    """One `InputDataConfig` channel, staged into /opt/ml/input/data/<name>."""

    name: str
    source: str  # an s3:// URI, or a host path (a local path or file:// URI)
    data_type: str = "S3Prefix"
    distribution: str = "FullyReplicated"
    input_mode: str = "File"
    content_type: str | None = None

    @property
    def from_s3(self) -> bool:
        return self.source.startswith("s3://")

    def config_entry(self) -> dict[str, str]:
        """Its entry in inputdataconfig.json."""
        entry = {
            "TrainingInputMode": self.input_mode,
            "S3DistributionType": self.distribution,
            "RecordWrapperType": "None",
        }
        if self.content_type:
            entry["ContentType"] = self.content_type
        return entry


class Outputs(msgspec.Struct, frozen=True, kw_only=True):
    """Where this host's outputs go once the attempt ends (kept in the attempt's
    record, so an agent restarted meanwhile still collects them)."""

    ml_dir: str  # the host folder seen as /opt/ml
    training_job_name: str
    output_path: str = ""  # OutputDataConfig.S3OutputPath ("": outputs stay on the host)
    role_arn: str = ""
    uploads: bool = True  # the gang's first host uploads; the others keep theirs
    # Restored on every host, mirrored to S3 by the uploading one while the job runs.
    checkpoints: Checkpoints | None = None

    @property
    def model_uri(self) -> str:
        return self._under("model.tar.gz")

    @property
    def output_uri(self) -> str:
        return self._under("output.tar.gz")

    def _under(self, name: str) -> str:
        if not self.output_path:
            return ""
        base = self.output_path.rstrip("/")
        return f"{base}/{self.training_job_name}/output/{name}"


class Contract(msgspec.Struct, frozen=True, kw_only=True):
    training_job_name: str
    training_job_arn: str
    current_host: str  # algo-i
    hosts: tuple[str, ...]  # algo-1..algo-N, sorted as SageMaker sorts them
    host_ids: tuple[str, ...]  # the gang's host ids, in the same order
    instance_type: str
    hyperparameters: dict[str, str]
    channels: tuple[Channel, ...]
    outputs: Outputs
    hosts_file: str  # the host file seen as /etc/hosts

    def resource_config(self, network_interface: str) -> dict[str, Any]:
        return {
            "current_host": self.current_host,
            "current_instance_type": self.instance_type,
            "current_group_name": GROUP_NAME,
            "hosts": list(self.hosts),
            "instance_groups": [
                {
                    "instance_group_name": GROUP_NAME,
                    "instance_type": self.instance_type,
                    "hosts": list(self.hosts),
                }
            ],
            "network_interface_name": network_interface,
        }

    def input_data_config(self) -> dict[str, dict[str, str]]:
        return {channel.name: channel.config_entry() for channel in self.channels}

    def environment(self) -> dict[str, str]:
        return {
            "TRAINING_JOB_NAME": self.training_job_name,
            "TRAINING_JOB_ARN": self.training_job_arn,
        }


def algo_hosts(count: int) -> tuple[str, ...]:
    """`algo-1`..`algo-N`, sorted as strings (SageMaker's order: algo-10 before algo-2)."""
    return tuple(sorted(f"algo-{i}" for i in range(1, count + 1)))


def build_contract(
    job: Job,
    payload: dict[str, Any],
    *,
    host: str,
    instance_type: str,
    ml_dir: str,
    hosts_file: str,
) -> Contract:
    """Raises `LaunchError` (CLIENT_ERROR) for a payload the contract cannot run."""
    name = training_job_name(job.job_name, job.job_id, job.attempt_no)
    gang = job.hosts or (host,)
    names = [f"algo-{i}" for i in range(1, len(gang) + 1)]  # by the gang's order
    current = names[gang.index(host)] if host in gang else names[0]
    by_name = dict(zip(names, gang, strict=True))
    algos = algo_hosts(len(gang))
    output_path = _output_path(payload.get("OutputDataConfig"))
    return Contract(
        training_job_name=name,
        training_job_arn=training_job_arn(name),
        current_host=current,
        hosts=algos,
        host_ids=tuple(by_name[algo] for algo in algos),
        instance_type=instance_type,
        hyperparameters=_hyperparameters(payload.get("HyperParameters")),
        channels=channels_of(payload),
        outputs=Outputs(
            ml_dir=ml_dir,
            training_job_name=name,
            output_path=output_path,
            role_arn=str(payload.get("RoleArn") or ""),
            uploads=current == "algo-1",
            checkpoints=checkpoints_of(payload, ml_dir),  # restored on every host
        ),
        hosts_file=hosts_file,
    )


def channels_of(payload: dict[str, Any]) -> tuple[Channel, ...]:
    """The channels of `InputDataConfig`: from S3, a local path or a file:// URI."""
    value = payload.get("InputDataConfig")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise LaunchError.client("InputDataConfig must be a list")
    algorithm = payload.get("AlgorithmSpecification")
    default_mode = "File"
    if isinstance(algorithm, dict) and isinstance(algorithm.get("TrainingInputMode"), str):
        default_mode = algorithm["TrainingInputMode"]
    channels: dict[str, Channel] = {}
    for index, entry in enumerate(value):
        where = f"InputDataConfig[{index}]"
        channel = payload_mapping(entry, where)
        name = channel.get("ChannelName")
        if not isinstance(name, str) or not _CHANNEL_NAME.match(name) or name in (".", ".."):
            raise LaunchError.client(f"{where}.ChannelName must match [A-Za-z0-9._-]{{1,64}}")
        if name in channels:
            raise LaunchError.client(f"{where}.ChannelName {name!r} is given twice")
        mode = channel.get("InputMode") or default_mode
        if mode not in INPUT_MODES:
            raise LaunchError.client(
                f"{where}.InputMode {mode!r} is not supported (File, FastFile)"
            )
        source = payload_mapping(channel.get("DataSource"), f"{where}.DataSource")
        s3 = payload_mapping(source.get("S3DataSource"), f"{where}.DataSource.S3DataSource")
        fs = payload_mapping(
            source.get("FileSystemDataSource"), f"{where}.DataSource.FileSystemDataSource"
        )
        uri = s3.get("S3Uri") or fs.get("DirectoryPath")
        if not isinstance(uri, str) or not uri:
            raise LaunchError.client(
                f"{where}.DataSource needs S3DataSource.S3Uri or DirectoryPath"
            )
        data_type = s3.get("S3DataType") or "S3Prefix"
        distribution = s3.get("S3DistributionType") or "FullyReplicated"
        if data_type not in DATA_TYPES:
            raise LaunchError.client(f"{where}: S3DataType {data_type!r} is not supported")
        if distribution not in DISTRIBUTIONS:
            raise LaunchError.client(f"{where}: S3DistributionType {distribution!r} is unknown")
        content_type = channel.get("ContentType")
        channels[name] = Channel(
            name=name,
            source=_source(uri, where),
            data_type=data_type,
            distribution=distribution,
            input_mode=mode,
            content_type=content_type if isinstance(content_type, str) else None,
        )
    return tuple(channels.values())


def _source(uri: str, where: str) -> str:
    if uri.startswith("s3://"):
        try:
            parse_s3_uri(uri)
        except ValueError as err:
            raise LaunchError.client(f"{where}: {err}") from err
        return uri
    if uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):
            raise LaunchError.client(f"{where}: {uri} names another host")
        path = unquote(parsed.path)
    else:
        path = uri
    if not path.startswith("/"):
        raise LaunchError.client(f"{where}: {uri} is not an s3:// URI, a local path or file:// URI")
    return posixpath.normpath(path)


def _output_path(value: object) -> str:
    config = payload_mapping(value, "OutputDataConfig")
    path = config.get("S3OutputPath")
    if path in (None, ""):
        return ""
    if not isinstance(path, str):
        raise LaunchError.client("OutputDataConfig.S3OutputPath must be a string")
    try:
        parse_s3_uri(path)
    except ValueError as err:
        raise LaunchError.client(f"OutputDataConfig.S3OutputPath: {err}") from err
    return path


def _hyperparameters(value: object) -> dict[str, str]:
    given = payload_mapping(value, "HyperParameters")
    return {str(key): v if isinstance(v, str) else str(v) for key, v in given.items()}


def payload_mapping(value: object, what: str) -> dict[str, Any]:
    """A payload field that must be an object (None: empty); `what` names it."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise LaunchError.client(f"{what} must be an object")
    return value
