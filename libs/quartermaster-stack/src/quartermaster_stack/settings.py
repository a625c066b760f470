"""Settings of `qm up`: one frozen struct built from the command line."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec


def agent_job_path() -> str:
    """PATH of process-runtime jobs by default: `QM_NODE_JOB_PATH` (the node agent's own
    setting), else this process's PATH, so a job finds what the shell that ran `qm up`
    finds (the venv's `python` included)."""
    return os.environ.get("QM_NODE_JOB_PATH") or os.environ.get("PATH") or os.defpath


class StackSettings(msgspec.Struct, frozen=True, kw_only=True):
    data_dir: Path = Path(".qm-data")
    nodes: int = 3
    instance_type: str = "ml.g5.xlarge"
    runtime: str = "process"
    job_path: str = msgspec.field(default_factory=agent_job_path)  # process-runtime jobs' PATH
    registry: str = ""  # docker runtime: the registry cold starts pull images from ("": none)
    grpc_port: int = 50051
    # The AWS-compatible endpoint (Batch, SageMaker, IAM, STS; TLS and SigV4 when secure).
    # -1: off; 0: any free port (`qm up` asks for DEFAULT_AWS_PORT).
    aws_port: int = 0
    nats_url: str | None = None  # None: embed a nats-server under data_dir
    postgres_url: str | None = None  # None: embed Postgres under data_dir
    # The object store the default execution role maps to (<data_dir>/credentials/roles.json):
    # SeaweedFS embedded under data_dir, or the S3 API at s3_url with these keys.
    # roles_file: an operator's role map, used as is (no store started, none written).
    # object_store False: no store and no role map (any RoleArn is accepted).
    object_store: bool = True
    s3_url: str | None = None
    s3_access_key_id: str = ""
    s3_secret_access_key: str = ""
    s3_region: str = "us-east-1"
    s3_bucket: str = "quartermaster"  # made at start: the SageMaker SDK's default bucket
    roles_file: Path | None = None
    gpus_per_node: int | None = None  # None: detect (nvidia-smi), else 0
    stop_grace_seconds: float = 30.0
    heartbeat_seconds: float = 2.0
    heartbeat_timeout_seconds: float = 15.0
    tick_seconds: float = 2.0
    stream: str = "QM"
    subject_prefix: str = "qm"
    pg_schema: str = "qm"
    # Secured by default: TLS gRPC, bearer tokens, NATS users (`qm up --insecure`: none).
    secure: bool = True
    # One fold of the log for the scheduler, warm pool, admission and projector of the
    # process (False: each folds it on its own, as when run apart; benchmarks compare).
    shared_fold: bool = True
    # Each node agent in a process of its own, as on hosts of their own (False: all in
    # this process, on its loop, reading a share of its fold).
    node_processes: bool = False
    # Under load, at most one projection transaction this often (0: one per message run).
    projection_interval_seconds: float = 0.02
    # Prometheus /metrics of every service in the process (None: off; 0: any free port).
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    # An exported log (`qm log export`) loaded into the empty stream before the services
    # start (`qm up --restore`); None: start from the log that is there.
    restore_from: Path | None = None
