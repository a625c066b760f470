"""Facts about GPU hosts, reported by node agents and by the scheduler's liveness check."""

from __future__ import annotations

from quartermaster.events.base import Event, Request


class HostRegistered(Event, frozen=True, tag="host.registered"):
    host_id: str
    instance_type: str
    gpu_count: int = 0
    service_environment: str | None = None  # None: serves every matching environment
    address: str = ""


class HostHeartbeat(Event, frozen=True, tag="host.heartbeat"):
    host_id: str


class HostLost(Event, frozen=True, tag="host.lost"):
    host_id: str
    reason: str = "heartbeat timeout"


class HostDrained(Request, frozen=True, tag="host.drained"):
    host_id: str
