"""Configuration requests: service environments, scheduling policies, job queues, quota shares."""

from __future__ import annotations

from collections.abc import Sequence

from qm_admission.errors import already_exists, failed_precondition, invalid
from qm_admission.names import check_name
from qm_admission.validation import common, resources
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State

MAX_SHARES_PER_QUEUE = 20
_STRATEGIES: dict[int, ev.SharingStrategy] = {
    pb.SHARING_STRATEGY_RESERVE: ev.SharingStrategy.RESERVE,
    pb.SHARING_STRATEGY_LEND: ev.SharingStrategy.LEND,
    pb.SHARING_STRATEGY_LEND_AND_BORROW: ev.SharingStrategy.LEND_AND_BORROW,
}


# ---- service environments ------------------------------------------------------


def create_service_environment(
    request: pb.CreateServiceEnvironmentRequest, state: State, *, at: float
) -> list[ev.Event]:
    name = check_name("service_environment_name", request.service_environment_name)
    limits = common.capacity_limits("capacity_limits", request.capacity_limits)
    toggle = common.toggle("state", request.state, ev.State.ENABLED)
    resources.resource_type("service_environment_type", request.service_environment_type)
    tags = resources.check_tags("tags", request.tags)
    if name in state.environments:
        raise already_exists("service_environment_name", f"service environment {name!r} exists")
    return [
        ev.ServiceEnvironmentCreated(
            at=at, name=name, capacity_limits=limits, state=toggle, tags=tags
        )
    ]


def update_service_environment(
    request: pb.UpdateServiceEnvironmentRequest, state: State, *, at: float
) -> list[ev.Event]:
    env = common.environment(state, "service_environment", request.service_environment)
    toggle = common.toggle("state", request.state, env.state)
    if request.capacity_limits:
        limits = common.capacity_limits("capacity_limits", request.capacity_limits)
    else:
        limits = tuple(ev.CapacityLimit(u, n) for u, n in sorted(env.max_capacity.items()))
    return [
        ev.ServiceEnvironmentUpdated(at=at, name=env.name, capacity_limits=limits, state=toggle)
    ]


# ---- scheduling policies -------------------------------------------------------


def create_scheduling_policy(
    request: pb.CreateSchedulingPolicyRequest, state: State, *, at: float
) -> list[ev.Event]:
    name = check_name("name", request.name)
    common.idle_assignment_strategy(request.quota_share_policy)
    tags = resources.check_tags("tags", request.tags)
    if name in state.policies:
        raise already_exists("name", f"scheduling policy {name!r} exists")
    return [
        ev.SchedulingPolicyCreated(
            at=at, name=name, idle_resource_assignment_strategy="FIFO", tags=tags
        )
    ]


# ---- job queues ----------------------------------------------------------------


def create_job_queue(
    request: pb.CreateJobQueueRequest, state: State, *, at: float
) -> list[ev.Event]:
    name = check_name("job_queue_name", request.job_queue_name)
    toggle = common.toggle("state", request.state, ev.State.ENABLED)
    policy = common.policy(state, "scheduling_policy_arn", request.scheduling_policy_arn)
    orders = request.service_environment_order
    if len(orders) != 1:
        raise invalid("service_environment_order", f"needs exactly 1 entry, got {len(orders)}")
    if orders[0].order < 0:
        raise invalid("service_environment_order[0].order", "must be >= 0")
    field = "service_environment_order[0].service_environment"
    env = common.environment(state, field, orders[0].service_environment)
    resources.resource_type("job_queue_type", request.job_queue_type)
    priority = resources.DEFAULT_PRIORITY
    if request.HasField("priority"):
        priority = resources.queue_priority("priority", request.priority)
    tags = resources.check_tags("tags", request.tags)
    if name in state.queues:
        raise already_exists("job_queue_name", f"job queue {name!r} exists")
    for other in state.queues.values():
        if other.environment == env.name:
            raise failed_precondition(
                field, f"service environment {env.name!r} already serves job queue {other.name!r}"
            )
    return [
        ev.JobQueueCreated(
            at=at,
            name=name,
            service_environment=env.name,
            scheduling_policy=policy,
            state=toggle,
            tags=tags,
            priority=priority,
        )
    ]


def update_job_queue(
    request: pb.UpdateJobQueueRequest, state: State, *, at: float
) -> list[ev.Event]:
    queue = common.queue(state, "job_queue", request.job_queue)
    toggle = common.toggle("state", request.state, queue.state)
    policy = queue.policy
    if request.scheduling_policy_arn:
        policy = common.policy(state, "scheduling_policy_arn", request.scheduling_policy_arn)
    priority = queue.priority
    if request.HasField("priority"):
        priority = resources.queue_priority("priority", request.priority)
    return [
        ev.JobQueueUpdated(
            at=at, name=queue.name, state=toggle, scheduling_policy=policy, priority=priority
        )
    ]


# ---- quota shares --------------------------------------------------------------


def create_quota_share(
    request: pb.CreateQuotaShareRequest, state: State, *, at: float
) -> list[ev.Event]:
    queue = common.queue(state, "job_queue", request.job_queue)
    name = check_name("quota_share_name", request.quota_share_name)
    limits = _share_limits(request.capacity_limits, state, queue.environment)
    sharing = request.resource_sharing_configuration
    if sharing.strategy == pb.SHARING_STRATEGY_UNSPECIFIED:
        raise invalid("resource_sharing_configuration.strategy", "is required")
    strategy = _strategy(sharing.strategy)
    borrow_limit = _borrow_limit(sharing, strategy, current=-1)
    preemption = common.toggle(
        "preemption_configuration.in_share_preemption",
        request.preemption_configuration.in_share_preemption,
        ev.State.DISABLED,
    )
    toggle = common.toggle("state", request.state, ev.State.ENABLED)
    tags = resources.check_tags("tags", request.tags)
    if (queue.name, name) in state.shares:
        raise already_exists(
            "quota_share_name", f"quota share {name!r} exists in job queue {queue.name!r}"
        )
    if len(state.shares_of(queue.name)) >= MAX_SHARES_PER_QUEUE:
        raise failed_precondition(
            "job_queue", f"job queue {queue.name!r} has {MAX_SHARES_PER_QUEUE} quota shares already"
        )
    return [
        ev.QuotaShareCreated(
            at=at,
            job_queue=queue.name,
            name=name,
            capacity_limits=limits,
            strategy=strategy,
            borrow_limit=borrow_limit,
            in_share_preemption=preemption,
            state=toggle,
            tags=tags,
        )
    ]


def update_quota_share(
    request: pb.UpdateQuotaShareRequest, state: State, *, at: float
) -> list[ev.Event]:
    queue = common.queue(state, "job_queue", request.job_queue)
    share = common.share(state, queue.name, "quota_share_name", request.quota_share_name)
    if request.capacity_limits:
        limits = _share_limits(request.capacity_limits, state, queue.environment)
    else:
        limits = tuple(ev.CapacityLimit(u, n) for u, n in sorted(share.limits.items()))
    strategy, borrow_limit = share.strategy, share.borrow_limit
    if request.HasField("resource_sharing_configuration"):
        sharing = request.resource_sharing_configuration
        if sharing.strategy != pb.SHARING_STRATEGY_UNSPECIFIED:
            strategy = _strategy(sharing.strategy)
        kept = borrow_limit if strategy is ev.SharingStrategy.LEND_AND_BORROW else -1
        borrow_limit = _borrow_limit(sharing, strategy, current=kept)
    preemption = share.in_share_preemption
    if request.HasField("preemption_configuration"):
        preemption = common.toggle(
            "preemption_configuration.in_share_preemption",
            request.preemption_configuration.in_share_preemption,
            preemption,
        )
    toggle = common.toggle("state", request.state, share.state)
    return [
        ev.QuotaShareUpdated(
            at=at,
            job_queue=queue.name,
            name=share.name,
            capacity_limits=limits,
            strategy=strategy,
            borrow_limit=borrow_limit,
            in_share_preemption=preemption,
            state=toggle,
        )
    ]


# ---- helpers -------------------------------------------------------------------


def _share_limits(
    limits: Sequence[pb.CapacityLimit], state: State, environment: str
) -> tuple[ev.CapacityLimit, ...]:
    checked = common.capacity_limits("capacity_limits", limits)
    env = state.environments.get(environment)
    units = env.max_capacity if env is not None else {}
    for i, limit in enumerate(checked):
        if limit.capacity_unit not in units:
            raise invalid(
                f"capacity_limits[{i}].capacity_unit",
                f"{limit.capacity_unit!r} is not a capacity unit of service environment "
                f"{environment!r} ({', '.join(sorted(units)) or 'none'})",
            )
    return checked


def _strategy(value: int) -> ev.SharingStrategy:
    found = _STRATEGIES.get(value)
    if found is None:
        raise invalid("resource_sharing_configuration.strategy", f"unknown value {value}")
    return found


def _borrow_limit(
    sharing: pb.ResourceSharingConfiguration, strategy: ev.SharingStrategy, *, current: int
) -> int:
    field = "resource_sharing_configuration.borrow_limit"
    if not sharing.HasField("borrow_limit"):
        return current
    value = sharing.borrow_limit
    if value < -1:
        raise invalid(field, f"must be -1 (unlimited) or >= 0, got {value}")
    if value != -1 and strategy is not ev.SharingStrategy.LEND_AND_BORROW:
        raise invalid(field, f"applies to LEND_AND_BORROW only, not {strategy.value}")
    return value
