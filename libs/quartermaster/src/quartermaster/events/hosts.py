"""Facts about GPU hosts, reported by node agents and by the scheduler's liveness check."""

from __future__ import annotations

from quartermaster.events.base import Event, Request
from quartermaster.events.reasons import Rule


class HostRegistered(Event, frozen=True, tag="host.registered"):
    host_id: str
    instance_type: str
    gpu_count: int = 0
    service_environment: str | None = None  # None: serves every matching environment
    address: str = ""


class HostHeartbeat(Event, frozen=True, tag="host.heartbeat"):
    host_id: str


class HostLost(Event, frozen=True, tag="host.lost"):
    """Decision: the host is gone (no heartbeat); its attempts lose their capacity."""

    host_id: str
    reason: str = "heartbeat timeout"
    rule: Rule = Rule.CAPACITY_FAILURE
    last_heartbeat_at: float | None = None
    heartbeat_timeout_seconds: float | None = None


class HostDrained(Request, frozen=True, tag="host.drained"):
    """The host takes no new work until undrained, across agent restarts."""

    host_id: str


class HostUndrained(Request, frozen=True, tag="host.undrained"):
    """A drained host takes new work again."""

    host_id: str
