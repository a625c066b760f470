"""The node agent's settings: one frozen struct, read once from `QM_NODE_*` variables."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from qm_node_agent.errors import SettingsError
from quartermaster.bus.access import BusSettings, NatsCredentials
from quartermaster.envsettings import SettingsError as EnvSettingsError
from quartermaster.envsettings import from_env

PREFIX = "QM_NODE_"
DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
DEFAULT_STREAM = "QM"
DEFAULT_SUBJECT_PREFIX = "qm"
DEFAULT_HEARTBEAT_SECONDS = 5.0
DEFAULT_STOP_GRACE_SECONDS = 120.0
DEFAULT_LOG_CAP_BYTES = 16 * 1024 * 1024
DEFAULT_LOG_RETENTION_SECONDS = 7 * 86400.0
DEFAULT_READY_MAX_LAG_SECONDS = 10.0


class RuntimeKind(StrEnum):
    PROCESS = "process"
    DOCKER = "docker"


@dataclass(frozen=True, kw_only=True)
class NodeSettings:
    """Everything the agent is configured with; nothing else reads the environment."""

    host_id: str
    instance_type: str
    data_dir: Path
    nats_url: str = DEFAULT_NATS_URL
    gpu_count: int | None = None  # None: detect with nvidia-smi (no GPU found: 0)
    service_environment: str | None = None
    address: str = ""
    runtime: RuntimeKind = RuntimeKind.PROCESS
    stream: str = DEFAULT_STREAM
    subject_prefix: str = DEFAULT_SUBJECT_PREFIX
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    stop_grace_seconds: float = DEFAULT_STOP_GRACE_SECONDS
    docker_binary: str = "docker"
    registry: str = ""  # docker: where images are pulled from ("": only images already here)
    nvidia_smi: str = "nvidia-smi"
    job_path: str = os.defpath  # PATH of process-runtime jobs
    nats_credentials: NatsCredentials = field(default_factory=NatsCredentials)
    stream_replicas: int = 1
    nats_near_log_leader: bool = True  # see BusSettings
    log_cap_bytes: int = DEFAULT_LOG_CAP_BYTES  # an ended attempt's output kept: head + tail
    log_retention_seconds: float = DEFAULT_LOG_RETENTION_SECONDS  # then deleted
    metrics_port: int = 0  # serve /metrics, /livez and /readyz here (0: off)
    metrics_host: str = "127.0.0.1"
    ready_max_lag_seconds: float = DEFAULT_READY_MAX_LAG_SECONDS  # /readyz: fold this far behind
    read_whole_log: bool = False  # fold the whole log, not the host feed (no scheduler relays)
    # The read end of a pipe from the process that started this agent: at its EOF (that
    # process is gone, however it ended) the agent stops. None: no such parent.
    lifeline_fd: int | None = None
    # The execution roles' object-store credentials (`quartermaster.objectstore.RoleMap`,
    # JSON): a job's RoleArn selects what it stages channels and uploads outputs with,
    # and what its process or container receives. "": no object store.
    roles_file: str = ""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NodeSettings:
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(PREFIX + name)
            return value if value not in (None, "") else None

        def need(name: str) -> str:
            value = get(name)
            if value is None:
                raise SettingsError(f"{PREFIX}{name} is required")
            return value

        def number(name: str, default: float) -> float:
            raw = get(name)
            try:
                value = default if raw is None else float(raw)
            except ValueError as err:
                raise SettingsError(f"{PREFIX}{name}={raw!r} is not a number") from err
            if value <= 0:
                raise SettingsError(f"{PREFIX}{name} must be positive")
            return value

        def port(name: str) -> int:
            raw = get(name) or "0"
            if not raw.isdigit() or int(raw) > 65535:
                raise SettingsError(f"{PREFIX}{name}={raw!r} is not a port number (0: off)")
            return int(raw)

        gpu_raw = get("GPU_COUNT")
        try:
            gpu_count = None if gpu_raw is None else int(gpu_raw)
        except ValueError as err:
            raise SettingsError(f"{PREFIX}GPU_COUNT={gpu_raw!r} is not an integer") from err
        if gpu_count is not None and gpu_count < 0:
            raise SettingsError(f"{PREFIX}GPU_COUNT must not be negative")
        lifeline_raw = get("LIFELINE_FD")
        if lifeline_raw is not None and not lifeline_raw.isdigit():
            raise SettingsError(f"{PREFIX}LIFELINE_FD={lifeline_raw!r} is not a file descriptor")
        runtime_raw = get("RUNTIME") or RuntimeKind.PROCESS.value
        try:
            runtime = RuntimeKind(runtime_raw)
        except ValueError as err:
            raise SettingsError(f"{PREFIX}RUNTIME={runtime_raw!r}: use process or docker") from err
        try:
            bus = from_env(BusSettings, PREFIX, env)
        except EnvSettingsError as err:
            raise SettingsError(str(err)) from err
        return cls(
            host_id=need("HOST_ID"),
            instance_type=need("INSTANCE_TYPE"),
            data_dir=Path(need("DATA_DIR")),
            nats_url=get("NATS_URL") or DEFAULT_NATS_URL,
            gpu_count=gpu_count,
            service_environment=get("SERVICE_ENVIRONMENT"),
            address=get("ADDRESS") or socket.gethostname(),
            runtime=runtime,
            stream=get("STREAM") or DEFAULT_STREAM,
            subject_prefix=get("SUBJECT_PREFIX") or DEFAULT_SUBJECT_PREFIX,
            heartbeat_seconds=number("HEARTBEAT_SECONDS", DEFAULT_HEARTBEAT_SECONDS),
            stop_grace_seconds=number("STOP_GRACE_SECONDS", DEFAULT_STOP_GRACE_SECONDS),
            docker_binary=get("DOCKER_BINARY") or "docker",
            registry=get("REGISTRY") or "",
            nvidia_smi=get("NVIDIA_SMI") or "nvidia-smi",
            job_path=get("JOB_PATH") or env.get("PATH") or os.defpath,
            nats_credentials=bus.nats_credentials(),
            stream_replicas=bus.stream_replicas,
            nats_near_log_leader=bus.nats_near_log_leader,
            log_cap_bytes=int(number("LOG_CAP_BYTES", DEFAULT_LOG_CAP_BYTES)),
            log_retention_seconds=number("LOG_RETENTION_SECONDS", DEFAULT_LOG_RETENTION_SECONDS),
            metrics_port=port("METRICS_PORT"),
            metrics_host=get("METRICS_HOST") or "127.0.0.1",
            ready_max_lag_seconds=number("READY_MAX_LAG_SECONDS", DEFAULT_READY_MAX_LAG_SECONDS),
            read_whole_log=(get("READ_WHOLE_LOG") or "").lower() in {"1", "true", "yes"},
            lifeline_fd=None if lifeline_raw is None else int(lifeline_raw),
            roles_file=get("ROLES_FILE") or "",
        )

    def to_env(self) -> dict[str, str]:
        """The `QM_NODE_*` variables that `from_env` reads back as these settings: how a
        process that starts agents (`qm up --node-processes`) hands each one its own."""
        creds = self.nats_credentials
        values: dict[str, object] = {
            "HOST_ID": self.host_id,
            "INSTANCE_TYPE": self.instance_type,
            "DATA_DIR": self.data_dir,
            "NATS_URL": self.nats_url,
            "GPU_COUNT": self.gpu_count,
            "SERVICE_ENVIRONMENT": self.service_environment,
            "ADDRESS": self.address,
            "RUNTIME": self.runtime.value,
            "STREAM": self.stream,
            "SUBJECT_PREFIX": self.subject_prefix,
            "HEARTBEAT_SECONDS": self.heartbeat_seconds,
            "STOP_GRACE_SECONDS": self.stop_grace_seconds,
            "DOCKER_BINARY": self.docker_binary,
            "REGISTRY": self.registry,
            "NVIDIA_SMI": self.nvidia_smi,
            "JOB_PATH": self.job_path,
            "NATS_USER": creds.user,
            "NATS_PASSWORD": creds.password,
            "NATS_CREDS_FILE": creds.creds_file,
            "NATS_TLS_CA": creds.tls_ca,
            "NATS_TLS_CERT": creds.tls_cert,
            "NATS_TLS_KEY": creds.tls_key,
            "STREAM_REPLICAS": self.stream_replicas,
            "NATS_NEAR_LOG_LEADER": "true" if self.nats_near_log_leader else "false",
            "LOG_CAP_BYTES": self.log_cap_bytes,
            "LOG_RETENTION_SECONDS": self.log_retention_seconds,
            "METRICS_PORT": self.metrics_port,
            "METRICS_HOST": self.metrics_host,
            "READY_MAX_LAG_SECONDS": self.ready_max_lag_seconds,
            "READ_WHOLE_LOG": "true" if self.read_whole_log else "",
            "LIFELINE_FD": self.lifeline_fd,
            "ROLES_FILE": self.roles_file,
        }
        # None and "" are what an unset variable reads as: left out
        return {PREFIX + k: str(v) for k, v in values.items() if v is not None and v != ""}
