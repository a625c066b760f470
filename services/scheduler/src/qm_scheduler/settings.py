"""Scheduler settings, read once from `QM_SCHEDULER_*` environment variables."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

import msgspec


class SchedulerSettings(msgspec.Struct, frozen=True, kw_only=True):
    nats_url: str = "nats://127.0.0.1:4222"
    stream: str = "QM"
    subject_prefix: str = "qm"
    instance_id: str = ""
    lease_bucket: str = "qm-leases"
    lease_ttl_seconds: float = 6.0
    heartbeat_timeout_seconds: float = 30.0
    snapshot_bucket: str = "qm-snapshots"
    snapshot_every: int = 2000  # messages folded between snapshots
    queues: tuple[str, ...] = ()  # lead only these queues (empty: any)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SchedulerSettings:
        env = os.environ if env is None else env

        def get(name: str, default: str) -> str:
            return env.get(f"QM_SCHEDULER_{name}", default)

        return cls(
            nats_url=get("NATS_URL", cls.nats_url),
            stream=get("STREAM", cls.stream),
            subject_prefix=get("SUBJECT_PREFIX", cls.subject_prefix),
            instance_id=get("INSTANCE_ID", f"{socket.gethostname()}-{os.getpid()}"),
            lease_ttl_seconds=float(get("LEASE_TTL_SECONDS", str(cls.lease_ttl_seconds))),
            heartbeat_timeout_seconds=float(
                get("HEARTBEAT_TIMEOUT_SECONDS", str(cls.heartbeat_timeout_seconds))
            ),
            snapshot_every=int(get("SNAPSHOT_EVERY", str(cls.snapshot_every))),
            queues=tuple(q for q in get("QUEUES", "").split(",") if q),
        )
