"""Which queues an event changes: the counters an incremental pass compares.

The fold calls `touch` before it applies an event (the job, pool or host is
looked up as it was). A queue is touched when anything the allocation step of
that queue reads may change: its shares, its jobs, its pools, or a job of it
holding a host. What queues share (free hosts, environment use, available
pools) is not touched here; the pass compares those directly (`core.incremental`).
An event type not named here changes every queue, so a new event is safe before
anyone thinks about it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from quartermaster import events as ev
from quartermaster.core.model import ACTIVE_STATUSES
from quartermaster.core.state import State

Touch = Callable[[State, Any], None]


def _nothing(state: State, e: Any) -> None:
    pass


def touch_everything(state: State, e: Any) -> None:
    state.config_version += 1


def _job(state: State, e: Any) -> None:
    state.touch_job(e.job_id)


def _submitted(state: State, e: ev.JobSubmitted) -> None:
    state.queue_version[e.job_queue] += 1


def _dispatched(state: State, e: ev.JobDispatched) -> None:
    state.touch_job(e.job_id)
    if e.warm_pool is not None:  # the pool's units leave its own share
        state.touch_job(e.warm_pool)


def _pool_in_use(state: State, e: ev.WarmPoolInUse) -> None:
    state.touch_job(e.job_id)
    state.touch_job(e.from_job)


def _pool_reused(state: State, e: ev.WarmPoolReused) -> None:
    state.touch_job(e.job_id)
    state.touch_job(e.reused_by_job)


def _host(state: State, e: Any) -> None:
    host = state.hosts.get(e.host_id)
    if host is not None and host.holder is not None:
        state.touch_job(host.holder)


def _checkpointed(state: State, e: ev.JobCheckpointed) -> None:
    """A checkpoint moves a running job in its share's victim order, which reclaim and
    in-share preemption read: its queue, when the report is the live attempt's and the
    job is a victim (not stopping)."""
    job = state.jobs.get(e.job_id)
    if (
        job is not None
        and job.attempt_no == e.attempt
        and job.stop_cause is None
        and job.status in ACTIVE_STATUSES
    ):
        state.queue_version[job.queue] += 1


def _queue(state: State, e: Any) -> None:
    state.queue_version[e.name] += 1


def _share(state: State, e: Any) -> None:
    state.queue_version[e.job_queue] += 1


TOUCHES: dict[type[ev.Event], Touch] = {
    ev.HostHeartbeat: _nothing,
    ev.ClockTicked: _nothing,
    # A start changes the job's status and times, which no allocation step reads (it
    # reads the RUNNABLE, victim and use indexes, and a victim's order is its priority
    # and dispatch or checkpoint time): two events a job that re-decided its queue for
    # nothing.
    ev.JobStarting: _nothing,
    ev.JobRunning: _nothing,
    ev.JobCheckpointed: _checkpointed,
    ev.JobSubmitted: _submitted,
    ev.JobDispatched: _dispatched,
    ev.WarmPoolInUse: _pool_in_use,
    ev.WarmPoolReused: _pool_reused,
    ev.JobQueueCreated: _queue,
    ev.JobQueueUpdated: _queue,
    ev.QuotaShareCreated: _share,
    ev.QuotaShareUpdated: _share,
    ev.QuotaShareDeleted: _share,
    **dict.fromkeys((ev.HostRegistered, ev.HostLost, ev.HostDrained, ev.HostUndrained), _host),
    **dict.fromkeys(
        (
            ev.JobPriorityUpdated,
            ev.JobTerminationRequested,
            ev.JobStatusReasonSet,
            ev.JobPreemptionRequested,
            ev.JobTimedOut,
            ev.JobRetried,
            ev.JobFinallyFailed,
            ev.JobSucceeded,
            ev.JobFailed,
            ev.JobStopConfirmed,
            ev.WarmPoolAvailable,
            ev.WarmPoolTerminated,
            ev.WarmPoolKeepAliveUpdated,
        ),
        _job,
    ),
}


def touch(state: State, event: ev.Event) -> None:
    TOUCHES.get(type(event), touch_everything)(state, event)
