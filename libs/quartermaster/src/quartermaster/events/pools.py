"""Facts in a managed warm pool's life. A pool is named by the job that left it."""

from __future__ import annotations

from quartermaster.events.base import Event, Request, WarmPoolTerminationReason


class WarmPoolAvailable(Event, frozen=True, tag="warm_pool.available"):
    """Decision: the ended job's hosts are kept warm until `expires_at`."""

    job_id: str
    hosts: tuple[str, ...]
    expires_at: float
    chain_id: str
    chain_started_at: float


class WarmPoolInUse(Event, frozen=True, tag="warm_pool.in_use"):
    """Decision: `job_id` runs on the pool that `from_job` left."""

    job_id: str
    from_job: str


class WarmPoolReused(Event, frozen=True, tag="warm_pool.reused"):
    job_id: str
    reused_by_job: str
    billable_seconds: int


class WarmPoolTerminated(Event, frozen=True, tag="warm_pool.terminated"):
    job_id: str
    reason: WarmPoolTerminationReason
    billable_seconds: int


class WarmPoolKeepAliveUpdated(Request, frozen=True, tag="warm_pool.keep_alive_updated"):
    """A user changed a pool's keep-alive; 0 terminates it."""

    job_id: str
    keep_alive_seconds: int


class ClockTicked(Event, frozen=True, tag="clock.ticked"):
    """Time passes: lets the pass expire pools and time out attempts on replay too."""
