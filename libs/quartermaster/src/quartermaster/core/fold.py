"""`fold(state, event) -> state`: the only way state changes.

The fold is total and tolerant: an event that no longer applies (a report
for an old attempt, a stop for a finished job) changes nothing, so a
redelivered or late message can never corrupt the state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from sys import intern
from typing import Any

import msgspec

from quartermaster import events as ev
from quartermaster.core import lifecycle, retention, upcast, warm_pools
from quartermaster.core.changes import TOUCHES, touch_everything
from quartermaster.core.model import (
    ACTIVE_STATUSES,
    FAILED,
    HOST_DRAINED,
    HOST_HEALTHY,
    HOST_LOST,
    POOL_AVAILABLE,
    POOL_IN_USE,
    POOL_REUSED,
    POOL_TERMINATED,
    RUNNABLE,
    RUNNING,
    SCHEDULED,
    STARTING,
    STOP_PEER_FAILED,
    STOP_PREEMPTED,
    STOP_TERMINATED,
    STOP_TIMED_OUT,
    TERMINAL_STATUSES,
    Attempt,
    Environment,
    Host,
    HostStatus,
    Job,
    Queue,
    Share,
    WarmPool,
)
from quartermaster.core.replay import replaying
from quartermaster.core.state import DEADLINES, State

Handler = Callable[[State, Any], None]
_HANDLERS: dict[type[ev.Event], Handler] = {}
# Handlers that also do their event's touch (`core.changes`): with the job they look
# up anyway, instead of a second call and lookup. tests/unit/core/test_fold_touches.py
# checks, event by event, that they count exactly what `changes.touch` counts.
_FUSED: dict[type[ev.Event], Handler] = {}


def _on(event_type: type[ev.Event]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[event_type] = fn
        _STEPS.clear()  # built again with this handler
        return fn

    return register


def _fused(event_type: type[ev.Event]) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _FUSED[event_type] = fn
        _STEPS.clear()
        return fn

    return register


def _ignore(state: State, e: Any) -> None:
    pass


# Per event type, the one call that applies it: a fused handler, or what it touches
# (`core.changes`, applied first: the job, pool or host as it was) then its handler.
_STEPS: dict[type[ev.Event], Handler] = {}


def _step(kind: type[ev.Event]) -> Handler:
    step = _FUSED.get(kind)
    if step is None:
        touch, handler = TOUCHES.get(kind, touch_everything), _HANDLERS.get(kind, _ignore)

        def step(state: State, e: Any) -> None:
            touch(state, e)
            handler(state, e)

    _STEPS[kind] = step
    return step


def fold(state: State, event: ev.Event) -> State:
    """Apply one event. Mutates and returns `state` (a fold step, kept in place for speed).

    `fold_all` repeats these steps inline: change both alike."""
    at = event.at
    if at > state.now:
        state.now = at
    state.seq += 1
    kind = type(event)
    (_STEPS.get(kind) or _step(kind))(state, event)
    if state.retention_seconds is not None and state.now >= state.next_sweep:
        retention.sweep(state)
    return state


def _touched(state: State, job_id: str) -> Job | None:
    """`State.touch_job` that returns the job: its queue (or its pool's) decides again."""
    job = state.jobs.get(job_id)
    if job is not None:
        state.queue_version[job.queue] += 1
        return job
    pool = state.pools.get(job_id)
    if pool is not None:
        state.queue_version[pool.queue] += 1
    return None


def fold_all(state: State, events: Iterable[ev.Event]) -> State:
    """A replay (`core.replay`): `fold` of each event in turn, the sorted indexes derived
    from the entities once at the end (O(entities)), and `fold`'s own steps inlined (one
    call fewer an event). For many events folded before anyone reads; a few events
    into a large state are cheaper through `fold`."""
    steps = _STEPS
    with replaying(state):
        for event in events:
            at = event.at
            if at > state.now:
                state.now = at
            state.seq += 1
            kind = type(event)
            (steps.get(kind) or _step(kind))(state, event)
            if state.retention_seconds is not None and state.now >= state.next_sweep:
                retention.sweep(state)
    return state


# ---- configuration ------------------------------------------------------


def _limits(limits: tuple[ev.CapacityLimit, ...]) -> dict[str, int]:
    return {lim.capacity_unit: lim.max_capacity for lim in limits}


@_on(ev.ServiceEnvironmentCreated)
@_on(ev.ServiceEnvironmentUpdated)
def _environment(state: State, e: ev.ServiceEnvironmentCreated) -> None:
    before = state.environments.get(e.name)
    tags = dict(e.tags) if isinstance(e, ev.ServiceEnvironmentCreated) else None
    if tags is None:
        tags = dict(before.tags) if before is not None else {}
    state.environments[e.name] = Environment(e.name, _limits(e.capacity_limits), e.state, tags)


@_on(ev.SchedulingPolicyCreated)
def _policy(state: State, e: ev.SchedulingPolicyCreated) -> None:
    state.policies[e.name] = e.idle_resource_assignment_strategy
    state.policy_tags[e.name] = dict(e.tags)


@_on(ev.JobQueueCreated)
def _queue_created(state: State, e: ev.JobQueueCreated) -> None:
    state.queues[e.name] = Queue(
        e.name, e.service_environment, e.scheduling_policy, e.state, dict(e.tags), e.priority
    )


@_on(ev.JobQueueUpdated)
def _queue_updated(state: State, e: ev.JobQueueUpdated) -> None:
    queue = state.queues.get(e.name)
    if queue is not None:
        queue.state = e.state
        queue.policy = e.scheduling_policy
        if e.priority is not None:
            queue.priority = e.priority


@_on(ev.QuotaShareCreated)
@_on(ev.QuotaShareUpdated)
def _share(state: State, e: ev.QuotaShareCreated) -> None:
    before = state.shares.get((e.job_queue, e.name))
    tags = dict(e.tags) if isinstance(e, ev.QuotaShareCreated) else None
    if tags is None:
        tags = dict(before.tags) if before is not None else {}
    state.put_share(
        Share(
            e.job_queue,
            e.name,
            _limits(e.capacity_limits),
            e.strategy,
            e.borrow_limit,
            e.in_share_preemption,
            e.state,
            tags,
        )
    )


@_on(ev.QuotaShareDeleted)
def _share_deleted(state: State, e: ev.QuotaShareDeleted) -> None:
    state.drop_share(e.job_queue, e.name)


# Deletes and tags: admission writes them only for resources it found (unused, for a
# delete); entities are replaced, never changed in place (a fork shares them).


@_on(ev.ServiceEnvironmentDeleted)
def _environment_deleted(state: State, e: ev.ServiceEnvironmentDeleted) -> None:
    state.environments.pop(e.name, None)


@_on(ev.SchedulingPolicyUpdated)
def _policy_updated(state: State, e: ev.SchedulingPolicyUpdated) -> None:
    if e.name in state.policies:
        state.policies[e.name] = e.idle_resource_assignment_strategy


@_on(ev.SchedulingPolicyDeleted)
def _policy_deleted(state: State, e: ev.SchedulingPolicyDeleted) -> None:
    state.policies.pop(e.name, None)
    state.policy_tags.pop(e.name, None)


@_on(ev.JobQueueDeleted)
def _queue_deleted(state: State, e: ev.JobQueueDeleted) -> None:
    state.queues.pop(e.name, None)


@_on(ev.ResourceTagged)
@_on(ev.ResourceUntagged)
def _tags(state: State, e: ev.ResourceTagged | ev.ResourceUntagged) -> None:
    before = tags_of(state, e.kind, e.name, e.job_queue)
    if before is None:
        return
    after = dict(before)
    if isinstance(e, ev.ResourceTagged):
        after.update(e.tags)
    else:
        for key in e.tag_keys:
            after.pop(key, None)
    kind = e.kind
    if kind is ev.ResourceKind.SERVICE_ENVIRONMENT:
        state.environments[e.name] = msgspec.structs.replace(state.environments[e.name], tags=after)
    elif kind is ev.ResourceKind.SCHEDULING_POLICY:
        state.policy_tags[e.name] = after
    elif kind is ev.ResourceKind.JOB_QUEUE:
        state.queues[e.name].tags = after
    elif kind is ev.ResourceKind.QUOTA_SHARE:
        share = state.shares[(e.job_queue, e.name)]
        state.put_share(msgspec.structs.replace(share, tags=after))
    else:
        state.jobs[e.name].tags = after


def tags_of(
    state: State, kind: ev.ResourceKind, name: str, job_queue: str = ""
) -> dict[str, str] | None:
    """The tags of a resource, or None when there is no such resource."""
    if kind is ev.ResourceKind.SERVICE_ENVIRONMENT:
        env = state.environments.get(name)
        return env.tags if env is not None else None
    if kind is ev.ResourceKind.SCHEDULING_POLICY:
        return state.policy_tags.get(name, {}) if name in state.policies else None
    if kind is ev.ResourceKind.JOB_QUEUE:
        queue = state.queues.get(name)
        return queue.tags if queue is not None else None
    if kind is ev.ResourceKind.QUOTA_SHARE:
        share = state.shares.get((job_queue, name))
        return share.tags if share is not None else None
    job = state.jobs.get(name)
    return job.tags if job is not None else None


# ---- jobs: requests -----------------------------------------------------


@_fused(ev.JobSubmitted)
def _submitted(state: State, e: ev.JobSubmitted) -> None:
    state.queue_version[e.job_queue] += 1  # changes: the queue it joins
    if e.job_id in state.jobs:
        return
    duration, runtime = e.attempt_duration_seconds, e.max_runtime_seconds
    key = e.warm_pool_key
    if len(key.security_group_ids) > 1 or len(key.subnets) > 1 or len(key.session_tag_keys) > 1:
        key = warm_pools.match_key(key)  # lists of 0 or 1 are already sorted sets
    # Positional, in `Job`'s field order: msgspec matches keywords one field at a time
    # (45 fields: about 8 us a job by keyword, 1 us by position).
    # One string object per queue, share and unit (interned): the index keys built from
    # them later compare by identity, not character by character.
    queue, share, unit = intern(e.job_queue), intern(e.quota_share), intern(e.instance_type)
    job = Job(
        e.job_id,
        e.job_name,
        queue,
        share,
        unit,
        e.instance_count,
        e.scheduling_priority,
        e.at,
        e.retry_attempts,
        e.evaluate_on_exit,
        e.preemption_retries,
        # the tighter of the two limits that are set (0 or None: not set)
        (min(duration, runtime) if runtime else duration) if duration else (runtime or None),
        e.keep_alive_seconds,
        key,
        e.payload,
        dict(e.tags),
        e.client_token,
        duration,
        e.service_job_type,
    )
    job.chain_id = e.job_id
    job.submitted_by = e.principal
    state.jobs[e.job_id] = job
    # Job.queue_entry, built here from the event
    entry = (-e.scheduling_priority, e.at, e.job_id, e.job_id)
    state.runnable.put((queue, share, unit), entry)


@_on(ev.JobPriorityUpdated)
def _priority(state: State, e: ev.JobPriorityUpdated) -> None:
    job = state.jobs.get(e.job_id)
    if job is None or job.status in TERMINAL_STATUSES:
        return
    job.priority_updated_by = e.principal
    queued = job.status is RUNNABLE and not job.awaiting_outcome
    victim = job.status in ACTIVE_STATUSES and job.stop_cause is None
    if queued:
        state.dequeue(job)
    if victim:
        state.drop_victim(job)
    job.priority = e.scheduling_priority
    if queued:
        state.enqueue(job)
    if victim:
        state.add_victim(job)


@_on(ev.JobTerminationRequested)
def _terminate(state: State, e: ev.JobTerminationRequested) -> None:
    job = state.jobs.get(e.job_id)
    if job is None or job.status in TERMINAL_STATUSES:
        return
    job.terminated_by = e.principal
    ended = job.awaiting_outcome  # the attempt already ended; only its outcome was pending
    if ended:
        lifecycle.settle_outcome(state, job)
    if job.status is RUNNABLE and not ended:
        state.dequeue(job)
    was_active = job.status in ACTIVE_STATUSES and not ended
    job.status = FAILED
    job.status_reason = e.reason
    job.is_terminated = True
    job.stopped_at = e.at
    if was_active and job.hosts:
        lifecycle.request_stop(state, job, STOP_TERMINATED, e.reason)
    elif job.hosts:  # retained after a failed attempt: the end is now final
        lifecycle.release(state, job, keep=job.retained)


@_on(ev.JobStatusReasonSet)
def _reason(state: State, e: ev.JobStatusReasonSet) -> None:
    job = state.jobs.get(e.job_id)
    if job is not None and job.status not in TERMINAL_STATUSES:
        job.status_reason = e.reason


# ---- jobs: decisions ----------------------------------------------------


@_fused(ev.JobDispatched)
def _dispatched(state: State, e: ev.JobDispatched) -> None:
    job = state.jobs.get(e.job_id)
    pool_id = e.warm_pool
    if pool_id is not None:  # changes: the pool's units leave its own share
        _touched(state, pool_id)
    if job is None:
        _touched(state, e.job_id)
        return
    state.queue_version[job.queue] += 1  # changes: the job's queue
    if job.status is not RUNNABLE or job.awaiting_outcome:
        return
    env = state.queues[job.queue].environment
    hosts, known = e.hosts, state.hosts
    # Raced with another writer (host lost, taken, pool gone): the job stays RUNNABLE.
    pool = None
    if pool_id is None:
        for host_id in hosts:
            host = known.get(host_id)
            if host is None or host.holder is not None or host.status is not HOST_HEALTHY:
                return
        if len(hosts) > 1 and len(set(hosts)) != len(hosts):
            return
    else:
        pool = state.pools.get(pool_id)
        if pool is None or pool.status is not POOL_AVAILABLE or pool.hosts != hosts:
            return
    queue, share, unit, count = job.queue, job.share, job.unit, job.count
    key = (queue, share, unit)
    use, env_use = state.use, state.env_use
    job_id = job.job_id
    if pool is not None:
        state.unindex_pool(pool)
        use[(pool.queue, pool.share, pool.unit)] -= pool.count  # State.charge, inlined
        env_use[(env, pool.unit)] -= pool.count
        job.chain_id = pool.chain_id
        job.chain_started_at = pool.chain_started_at
    else:  # stores skipped where the value is already there (a Struct's store is slow)
        if job.chain_id != job_id:
            job.chain_id = job_id
        if job.chain_started_at is not None:
            job.chain_started_at = None
    priority = job.priority
    state.runnable.drop(key, (-priority, job.created_at, job_id, job_id))  # queue_entry
    free_bound = state.free_bound
    for host_id in hosts:  # State.take_host, inlined
        host = known[host_id]
        host_env = host.environment
        if host_env is None:
            state.free_unbound.drop(host.unit, host_id)
        else:
            free_bound.drop((host_env, host.unit), host_id)
        host.holder = job_id
        host.holder_env = env
    use[key] += count
    env_use[(env, unit)] += count
    job.status = SCHEDULED
    if job.status_reason:
        job.status_reason = ""
    job.attempt_no = e.attempt
    job.hosts = hosts
    attempts = job.attempts
    if attempts:  # what an earlier attempt left; a first one finds the defaults
        job.ended_hosts = ()
        job.started = False
        job.stop_cause = None
        job.stop_reason = ""
        job.failure = None
        job.failure_reason = ""
        job.failure_exit_code = None
        job.running_at = None
        job.last_checkpoint_at = None
    job.dispatched_at = at = e.at
    job.attempts = (*attempts, Attempt(e.attempt, hosts, at))
    state.victims.put(key, (priority, -at, job_id))  # preemption.victim_order


@_on(ev.JobPreemptionRequested)
def _preempt(state: State, e: ev.JobPreemptionRequested) -> None:
    job = lifecycle.current(state, e.job_id, e.attempt)
    if job is not None and job.status in ACTIVE_STATUSES and job.stop_cause is None:
        job.attempts[-1].seconds_at_risk = e.seconds_at_risk  # what the decision counted
        lifecycle.request_stop(state, job, STOP_PREEMPTED, e.reason)


@_on(ev.JobTimedOut)
def _timed_out(state: State, e: ev.JobTimedOut) -> None:
    job = lifecycle.current(state, e.job_id, e.attempt)
    if job is not None and job.status in ACTIVE_STATUSES and job.stop_cause is None:
        lifecycle.request_stop(state, job, STOP_TIMED_OUT, e.reason)


@_on(ev.JobRetried)
def _retried(state: State, e: ev.JobRetried) -> None:
    job = state.jobs.get(e.job_id)
    if job is None or not job.awaiting_outcome:
        return
    lifecycle.settle_outcome(state, job)
    job.attempts_used = e.attempt
    if job.hosts:
        lifecycle.release(state, job, keep=False)
    lifecycle.make_runnable(state, job, e.reason)


@_on(ev.JobFinallyFailed)
def _finally_failed(state: State, e: ev.JobFinallyFailed) -> None:
    job = state.jobs.get(e.job_id)
    if job is None or not job.awaiting_outcome:
        return
    lifecycle.settle_outcome(state, job)
    job.status = FAILED
    job.status_reason = e.reason
    job.stopped_at = e.at
    if job.hosts:
        lifecycle.release(state, job, keep=job.retained)


# ---- jobs: node agent reports ------------------------------------------


# Reports name the live attempt (`lifecycle.current`, inlined in the frequent ones).


@_fused(ev.JobStarting)  # changes: touches nothing
def _starting(state: State, e: ev.JobStarting) -> None:
    job = state.jobs.get(e.job_id)
    if (
        job is None
        or job.attempt_no != e.attempt
        or job.awaiting_outcome
        or e.host not in job.hosts  # also: no hosts, no live attempt
    ):
        return
    if not job.started:
        job.started = True
    if job.status is SCHEDULED:
        job.status = STARTING


@_fused(ev.JobRunning)  # changes: touches nothing
def _running(state: State, e: ev.JobRunning) -> None:
    job = state.jobs.get(e.job_id)
    if (
        job is None
        or job.attempt_no != e.attempt
        or job.awaiting_outcome
        or e.host not in job.hosts
    ):
        return
    if not job.started:
        job.started = True
    status = job.status
    if status is SCHEDULED or status is STARTING:
        job.status = RUNNING
        job.running_at = at = e.at
        attempt = job.attempts[-1]
        attempt.started_at = at
        attempt.start_phases = e.start_phases
        if job.stop_cause is None and job.timeout_seconds is not None:  # State.set_deadline
            state.timeline.put(DEADLINES, (at + job.timeout_seconds, job.job_id))


@_on(ev.JobCheckpointed)
def _checkpointed(state: State, e: ev.JobCheckpointed) -> None:
    """The live attempt's work up to `e.at` survives a stop: it moves back in its share's
    victim order (`preemption.victim_order`). Reports of older attempts, and ones no
    later than what the attempt already saved (its dispatch included), change nothing."""
    job = state.jobs.get(e.job_id)
    if (
        job is None
        or job.attempt_no != e.attempt
        or job.awaiting_outcome
        or e.host not in job.hosts  # also: no hosts, no live attempt
    ):
        return
    at, saved = e.at, job.last_checkpoint_at
    if at <= (job.dispatched_at if saved is None else saved):  # preemption.saved_at
        return
    if job.status in ACTIVE_STATUSES and job.stop_cause is None:  # in `State.victims`
        state.drop_victim(job)
        job.last_checkpoint_at = at
        state.add_victim(job)
    else:
        job.last_checkpoint_at = at


@_fused(ev.JobSucceeded)
def _succeeded(state: State, e: ev.JobSucceeded) -> None:
    job = state.jobs.get(e.job_id)
    if job is None:
        _touched(state, e.job_id)
        return
    state.queue_version[job.queue] += 1  # changes: the job's queue
    if job.attempt_no != e.attempt or job.awaiting_outcome:
        return
    # lifecycle.end_on_host, inlined
    host, hosts, ended = e.host, job.hosts, job.ended_hosts
    if host not in hosts or host in ended:  # also: no hosts, no live attempt
        return
    job.ended_hosts = ended = (*ended, host)
    if e.exit_code is not None:
        job.attempts[-1].exit_code = e.exit_code
    if e.model_artifacts:  # only the host that uploads the model names it
        job.attempts[-1].model_artifacts = e.model_artifacts
    if len(ended) == len(hosts):
        lifecycle.finalize(state, job, e.at)


@_on(ev.JobFailed)
def _failed(state: State, e: ev.JobFailed) -> None:
    job = lifecycle.current(state, e.job_id, e.attempt)
    if job is None or e.host not in job.hosts or e.host in job.ended_hosts:
        return
    if job.failure is None:
        job.failure = e.failure_class
        job.failure_reason = e.reason
        job.failure_exit_code = e.exit_code
        job.attempts[-1].log_tail = e.log_tail
    if e.model_artifacts:
        job.attempts[-1].model_artifacts = e.model_artifacts
    if job.stop_cause is None and len(job.ended_hosts) + 1 < len(job.hosts):
        lifecycle.request_stop(state, job, STOP_PEER_FAILED, e.reason)
    lifecycle.host_ended(state, e.job_id, e.attempt, e.host, e.at, exit_code=e.exit_code)


@_on(ev.JobStopConfirmed)
def _stop_confirmed(state: State, e: ev.JobStopConfirmed) -> None:
    job = lifecycle.current(state, e.job_id, e.attempt)
    if job is None:
        return
    if e.model_artifacts and e.host in job.hosts and e.host not in job.ended_hosts:
        job.attempts[-1].model_artifacts = e.model_artifacts
    lifecycle.end_on_host(state, job, e.host, e.at, e.exit_code)


# ---- hosts ---------------------------------------------------------------


@_on(ev.HostRegistered)
def _host_registered(state: State, e: ev.HostRegistered) -> None:
    host = state.hosts.get(e.host_id)
    # A drain is the operator's, not the agent's: registering again does not undo it.
    drained = host is not None and host.drained
    status = HOST_DRAINED if drained else HOST_HEALTHY
    if host is not None and host.holder is not None:
        # Re-registration of a busy host (agent restart): keep its allocation.
        host.status = status
        host.last_heartbeat = e.at
        return
    if host is not None:
        state.not_free(host)
    host = Host(e.host_id, e.instance_type, e.gpu_count, e.service_environment, e.address)
    host.last_heartbeat = e.at
    host.drained = drained
    host.status = status
    state.hosts[e.host_id] = host
    state.mark_free(host)


@_on(ev.HostHeartbeat)
def _heartbeat(state: State, e: ev.HostHeartbeat) -> None:
    host = state.hosts.get(e.host_id)
    if host is not None:
        # A heartbeat delayed by a network cut can be stored after a newer registration:
        # it says the host was alive then, never that it is less alive now.
        host.last_heartbeat = max(host.last_heartbeat, e.at)


@_on(ev.HostLost)
def _host_lost(state: State, e: ev.HostLost) -> None:
    _host_gone(state, e.host_id, HOST_LOST, e.at, e.reason)


@_on(ev.HostDrained)
def _host_drained(state: State, e: ev.HostDrained) -> None:
    host = state.hosts.get(e.host_id)
    if host is not None:
        host.drained = True
    _host_gone(state, e.host_id, HOST_DRAINED, e.at, "host drained")


@_on(ev.HostUndrained)
def _host_undrained(state: State, e: ev.HostUndrained) -> None:
    host = state.hosts.get(e.host_id)
    if host is None or not host.drained:
        return
    host.drained = False
    if host.status is HOST_DRAINED:  # a LOST host stays lost until it registers
        host.status = HOST_HEALTHY
        if host.holder is None:
            state.mark_free(host)


def _host_gone(state: State, host_id: str, status: HostStatus, at: float, why: str) -> None:
    host = state.hosts.get(host_id)
    if host is None or host.status is status:
        return
    state.unhealthy(host, status)
    if status is HOST_DRAINED:
        return  # a drained host finishes what it runs; it only takes nothing new
    job = state.jobs.get(host.holder) if host.holder else None
    if job is not None and job.hosts and host_id in job.hosts and job.retained is False:
        lifecycle.host_lost(state, job, host_id, at, why)


# ---- warm pools ------------------------------------------------------------


@_fused(ev.WarmPoolAvailable)
def _pool_available(state: State, e: ev.WarmPoolAvailable) -> None:
    job = _touched(state, e.job_id)  # changes: the job's queue
    pool = state.pools.get(e.job_id)
    if pool is not None and pool.status is POOL_AVAILABLE:
        _restate_expiry(state, pool, e)
        return
    if job is None or not job.retained:
        return
    job_id = job.job_id
    state.retained.discard(job_id)
    job.retained = False
    if pool is None:  # positional, in `WarmPool`'s field order
        pool = WarmPool(
            job_id,
            job.queue,
            job.share,
            state.queues[job.queue].environment,
            job.unit,
            job.count,
            job.warm_pool_key,
            POOL_AVAILABLE,
            e.chain_id,
            e.chain_started_at,
            e.hosts,
            e.at,
            e.expires_at,
        )
        state.pools[job_id] = pool
    else:
        pool.status = POOL_AVAILABLE
        pool.hosts = e.hosts
        pool.available_since = e.at
        pool.expires_at = e.expires_at
        pool.chain_id = e.chain_id
        pool.chain_started_at = e.chain_started_at
    hosts = state.hosts
    for host_id in e.hosts:
        host = hosts.get(host_id)
        if host is not None:  # a decision naming an unknown host (a forged log) holds none
            host.holder = job_id
    job.hosts = ()
    state.index_pool(pool)


def _restate_expiry(state: State, pool: WarmPool, e: ev.WarmPoolAvailable) -> None:
    """The pass decided an Available pool's new expiry (after a keep-alive update)."""
    state.unindex_pool(pool)
    pool.expires_at = e.expires_at
    pool.user_terminated = e.rule is ev.Rule.USER_TERMINATED
    pool.requested_keep_alive = None
    pool.keep_alive_requested_at = None
    state.index_pool(pool)


@_fused(ev.WarmPoolInUse)
def _pool_in_use(state: State, e: ev.WarmPoolInUse) -> None:
    job = _touched(state, e.job_id)  # changes: both jobs' queues
    _touched(state, e.from_job)
    source = state.pools.get(e.from_job)
    if job is None or source is None:
        return
    state.pools[job.job_id] = WarmPool(
        job.job_id,
        job.queue,
        job.share,
        source.environment,
        job.unit,
        job.count,
        job.warm_pool_key,
        POOL_IN_USE,
        source.chain_id,
        source.chain_started_at,
        hosts=job.hosts,
    )


@_fused(ev.WarmPoolReused)
def _pool_reused(state: State, e: ev.WarmPoolReused) -> None:
    _touched(state, e.job_id)  # changes: both jobs' queues
    _touched(state, e.reused_by_job)
    pool = state.pools.get(e.job_id)
    if pool is None:
        return
    pool.status = POOL_REUSED
    pool.reused_by_job = e.reused_by_job
    pool.billable_seconds = e.billable_seconds
    pool.hosts = ()


@_on(ev.WarmPoolTerminated)
def _pool_terminated(state: State, e: ev.WarmPoolTerminated) -> None:
    pool = state.pools.get(e.job_id)
    if pool is None:
        return
    if pool.status is POOL_IN_USE:
        job = state.jobs.get(e.job_id)
        if job is not None and job.retained:  # its job ended: no pool opens on this chain
            lifecycle.end_in_use_pool(pool, e.reason)
            lifecycle.release(state, job, keep=False)
        return
    if pool.status is not POOL_AVAILABLE:
        return
    state.unindex_pool(pool)
    state.charge((pool.queue, pool.share, pool.unit), pool.environment, -pool.count)
    for host_id in pool.hosts:
        if host_id in state.hosts:
            state.mark_free(state.hosts[host_id])
    pool.status = POOL_TERMINATED
    pool.termination_reason = e.reason
    pool.billable_seconds = e.billable_seconds
    pool.hosts = ()


@_on(ev.WarmPoolKeepAliveUpdated)
def _keep_alive(state: State, e: ev.WarmPoolKeepAliveUpdated) -> None:
    job = state.jobs.get(e.job_id)
    if job is not None and (job.status not in TERMINAL_STATUSES or job.retained):
        job.keep_alive_seconds = e.keep_alive_seconds  # also before its pool opens
        if job.retained and e.keep_alive_seconds == 0:
            lifecycle.release(state, job, keep=False)  # the pool-to-be is given up at once
    pool = state.pools.get(e.job_id)
    if pool is None or pool.status is not POOL_AVAILABLE:
        return
    if not e.pass_decides_expiry:  # recorded when the fold still decided the expiry
        _restate_expiry(state, pool, upcast.keep_alive_v1(pool, e))
        return
    pool.requested_keep_alive = e.keep_alive_seconds  # the next pass decides the expiry
    pool.keep_alive_requested_at = e.at
