"""Facts about capacity configuration: environments, policies, queues, shares."""

from __future__ import annotations

from quartermaster.events.base import CapacityLimit, Request, SharingStrategy, State


class _EnvironmentConfig(Request, frozen=True):
    """An environment's whole configuration (created and updated carry the same)."""

    name: str
    capacity_limits: tuple[CapacityLimit, ...]
    state: State = State.ENABLED


class ServiceEnvironmentCreated(_EnvironmentConfig, frozen=True, tag="service_environment.created"):
    tags: dict[str, str] = {}


class ServiceEnvironmentUpdated(_EnvironmentConfig, frozen=True, tag="service_environment.updated"):
    pass


class SchedulingPolicyCreated(Request, frozen=True, tag="scheduling_policy.created"):
    name: str
    idle_resource_assignment_strategy: str = "FIFO"
    tags: dict[str, str] = {}


class JobQueueCreated(Request, frozen=True, tag="job_queue.created"):
    name: str
    service_environment: str
    scheduling_policy: str
    state: State = State.ENABLED
    tags: dict[str, str] = {}
    priority: int = 1


class JobQueueUpdated(Request, frozen=True, tag="job_queue.updated"):
    name: str
    state: State
    scheduling_policy: str
    priority: int | None = None  # None: unchanged (logs written before it was carried)


class _QuotaShareConfig(Request, frozen=True):
    """A share's whole configuration, so the fold needs no merge rules for updates."""

    job_queue: str
    name: str
    capacity_limits: tuple[CapacityLimit, ...]
    strategy: SharingStrategy
    borrow_limit: int = -1
    in_share_preemption: State = State.DISABLED
    state: State = State.ENABLED


class QuotaShareCreated(_QuotaShareConfig, frozen=True, tag="quota_share.created"):
    tags: dict[str, str] = {}


class QuotaShareUpdated(_QuotaShareConfig, frozen=True, tag="quota_share.updated"):
    pass


class QuotaShareDeleted(Request, frozen=True, tag="quota_share.deleted"):
    job_queue: str
    name: str
