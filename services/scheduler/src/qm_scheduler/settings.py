"""Scheduler settings, read once from `QM_SCHEDULER_*` environment variables."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Mapping

import msgspec

from quartermaster.bus.access import BusSettings
from quartermaster.envsettings import from_env


class SchedulerSettings(BusSettings, frozen=True, kw_only=True):
    instance_id: str = ""  # this replica's name (default: the host name)
    boot_id: str = ""  # made at each start (or kept in identity_file): names this process
    identity_file: str = ""  # keep boot_id here, locked: a restart takes its leases back at once
    lease_bucket: str = "qm-leases"
    lease_ttl_seconds: float = 1.5  # a leader silent this long is replaced
    lease_renew_seconds: float = 0.2  # renewals (and a standby's checks) this often
    heartbeat_timeout_seconds: float = 30.0
    # After this replica starts, judge no host lost for this long (None: one heartbeat
    # timeout): silence is judged only over a span it watched, so a stack restarted after
    # a while down does not lose hosts whose agents have not beaten again yet.
    liveness_grace_seconds: float | None = None
    # While this replica leads nothing, read the log every this many seconds, a batch at a
    # time (0: be sent each message). A standby needs its fold only to be near the head
    # when it takes over, and reads to the head then; one wake-up per batch costs far less
    # than one per message. Leading anything, it is sent each message.
    standby_read_interval_seconds: float = 0.25
    snapshot_bucket: str = "qm-snapshots"
    snapshot_every: int = 2000  # messages folded between snapshots
    terminal_retention_seconds: float = 3600.0  # ended jobs leave the state after this (0: never)
    queues: tuple[str, ...] = ()  # lead only these queues (empty: any)
    # Publish each host's view for node agents reading host feeds; off only where no agent
    # does (`qm up`: its agents read the process's fold).
    relay_host_feeds: bool = True
    metrics_port: int = 0  # serve /metrics, /livez and /readyz here (0: off)
    metrics_host: str = "127.0.0.1"
    ready_max_lag_seconds: float = 10.0  # /readyz: the fold at most this far behind the log

    def __post_init__(self) -> None:
        if not 0 < 2 * self.lease_renew_seconds <= self.lease_ttl_seconds:
            raise ValueError(
                f"lease_renew_seconds ({self.lease_renew_seconds}) must be positive and at "
                f"most half of lease_ttl_seconds ({self.lease_ttl_seconds}): a renewal "
                "needs a second try before the lease lapses"
            )

    @property
    def liveness_grace(self) -> float:
        grace = self.liveness_grace_seconds
        return self.heartbeat_timeout_seconds if grace is None else grace

    @property
    def holder_name(self) -> str:
        """The lease holder name: unique per running process (see `quartermaster.bus.lease`)."""
        return f"{self.instance_id}-{self.boot_id}" if self.boot_id else self.instance_id

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SchedulerSettings:
        """Fields from the environment; a missing name is the host name, a missing boot
        id a random one (pids collide across containers, so they cannot tell replicas
        apart). With `identity_file` the boot id is left to `identity.claim`."""
        settings = from_env(cls, "QM_SCHEDULER_", env)
        changes: dict[str, str] = {}
        if not settings.instance_id:
            changes["instance_id"] = socket.gethostname()
        if not settings.boot_id and not settings.identity_file:
            changes["boot_id"] = secrets.token_hex(6)
        return msgspec.structs.replace(settings, **changes) if changes else settings
