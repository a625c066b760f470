"""Checks shared by the request validators: lookups in the folded state and value rules."""

from __future__ import annotations

import re
from collections.abc import Sequence

from qm_admission.errors import invalid, not_found
from qm_admission.names import Kind, reference
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import Host, Job, State
from quartermaster.core.model import Environment, Queue, Share

MAX_CAPACITY_LIMITS = 5
MAX_PRIORITY = 9999
_UNIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

# Enum numbers of the API's ENABLED / DISABLED toggles (all toggle enums share them).
_TOGGLES = {1: ev.State.ENABLED, 2: ev.State.DISABLED}


# ---- lookups -----------------------------------------------------------------


def environment(state: State, field: str, ref: str) -> Environment:
    name = reference(field, ref, Kind.SERVICE_ENVIRONMENT)
    found = state.environments.get(name)
    if found is None:
        raise not_found(field, f"service environment {name!r} does not exist")
    return found


def policy(state: State, field: str, ref: str) -> str:
    name = reference(field, ref, Kind.SCHEDULING_POLICY)
    if name not in state.policies:
        raise not_found(field, f"scheduling policy {name!r} does not exist")
    return name


def queue(state: State, field: str, ref: str) -> Queue:
    name = reference(field, ref, Kind.JOB_QUEUE)
    found = state.queues.get(name)
    if found is None:
        raise not_found(field, f"job queue {name!r} does not exist")
    return found


def share(state: State, queue_name: str, field: str, name: str) -> Share:
    if not name:
        raise invalid(field, "is required")
    found = state.shares.get((queue_name, name))
    if found is None:
        raise not_found(field, f"quota share {name!r} does not exist in job queue {queue_name!r}")
    return found


def job(state: State, field: str, job_id: str) -> Job:
    if not job_id:
        raise invalid(field, "is required")
    found = state.jobs.get(job_id)
    if found is None:
        raise not_found(field, f"job {job_id!r} does not exist")
    return found


def host(state: State, field: str, host_id: str) -> Host:
    if not host_id:
        raise invalid(field, "is required")
    found = state.hosts.get(host_id)
    if found is None:
        raise not_found(field, f"host {host_id!r} is not registered")
    return found


# ---- values ------------------------------------------------------------------


def toggle(field: str, value: int, default: ev.State) -> ev.State:
    """An ENABLED/DISABLED enum; UNSPECIFIED gives `default` (create) or the current (update)."""
    if value == 0:
        return default
    found = _TOGGLES.get(value)
    if found is None:
        raise invalid(field, f"unknown value {value}")
    return found


def capacity_limits(field: str, limits: Sequence[pb.CapacityLimit]) -> tuple[ev.CapacityLimit, ...]:
    """1-5 limits with distinct, well-formed units and max_capacity >= 1."""
    if not 1 <= len(limits) <= MAX_CAPACITY_LIMITS:
        raise invalid(field, f"needs 1-{MAX_CAPACITY_LIMITS} entries, got {len(limits)}")
    seen: set[str] = set()
    out = []
    for i, limit in enumerate(limits):
        if _UNIT.fullmatch(limit.capacity_unit) is None:
            raise invalid(
                f"{field}[{i}].capacity_unit",
                f"must be an instance type such as 'ml.g5.xlarge', got {limit.capacity_unit!r}",
            )
        if limit.capacity_unit in seen:
            raise invalid(f"{field}[{i}].capacity_unit", f"{limit.capacity_unit!r} is listed twice")
        if limit.max_capacity < 1:
            raise invalid(f"{field}[{i}].max_capacity", f"must be >= 1, got {limit.max_capacity}")
        seen.add(limit.capacity_unit)
        out.append(ev.CapacityLimit(limit.capacity_unit, limit.max_capacity))
    return tuple(out)


def priority(field: str, value: int) -> int:
    if not 0 <= value <= MAX_PRIORITY:
        raise invalid(field, f"must be 0-{MAX_PRIORITY}, got {value}")
    return value


def idle_assignment_strategy(policy: pb.QuotaSharePolicy) -> str:
    """The strategy a scheduling policy lends idle capacity by (only FIFO exists)."""
    if policy.idle_resource_assignment_strategy not in (
        pb.IDLE_RESOURCE_ASSIGNMENT_STRATEGY_UNSPECIFIED,
        pb.IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIFO,
    ):
        raise invalid(
            "quota_share_policy.idle_resource_assignment_strategy", "only FIFO is supported"
        )
    return "FIFO"
