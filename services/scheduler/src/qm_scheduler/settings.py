"""Scheduler settings, read once from `QM_SCHEDULER_*` environment variables."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

import msgspec

from quartermaster.bus.access import BusSettings
from quartermaster.envsettings import from_env


class SchedulerSettings(BusSettings, frozen=True, kw_only=True):
    instance_id: str = ""
    lease_bucket: str = "qm-leases"
    lease_ttl_seconds: float = 6.0
    heartbeat_timeout_seconds: float = 30.0
    snapshot_bucket: str = "qm-snapshots"
    snapshot_every: int = 2000  # messages folded between snapshots
    queues: tuple[str, ...] = ()  # lead only these queues (empty: any)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SchedulerSettings:
        settings = from_env(cls, "QM_SCHEDULER_", env)
        if settings.instance_id:
            return settings
        return msgspec.structs.replace(
            settings, instance_id=f"{socket.gethostname()}-{os.getpid()}"
        )
