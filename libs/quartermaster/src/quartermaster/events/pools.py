"""Facts in a managed warm pool's life. A pool is named by the job that left it."""

from __future__ import annotations

from quartermaster.events import upcast
from quartermaster.events.base import Event, Request, WarmPoolTerminationReason
from quartermaster.events.reasons import Rule


class WarmPoolAvailable(Event, frozen=True, tag="warm_pool.available"):
    """Decision: the ended job's hosts are kept warm until `expires_at`.

    Also restates an Available pool's expiry after a keep-alive update. `rule`:
    KEEP_ALIVE, CHAIN_LIMIT (the chain's 28 days end first) or USER_TERMINATED.
    """

    job_id: str
    hosts: tuple[str, ...]
    expires_at: float
    chain_id: str
    chain_started_at: float
    rule: Rule | None = None
    keep_alive_seconds: int | None = None

    def __post_init__(self) -> None:
        if self.rule is None:  # upcast
            upcast.fill(self, rule=upcast.pool_opening(self.expires_at, self.chain_started_at))


class WarmPoolInUse(Event, frozen=True, tag="warm_pool.in_use"):
    """Decision: `job_id` runs on the pool that `from_job` left."""

    job_id: str
    from_job: str
    rule: Rule = Rule.POOL_MATCH


class WarmPoolReused(Event, frozen=True, tag="warm_pool.reused"):
    """Decision: a matching job took the pool."""

    job_id: str
    reused_by_job: str
    billable_seconds: int
    rule: Rule = Rule.POOL_MATCH


class WarmPoolTerminated(Event, frozen=True, tag="warm_pool.terminated"):
    """Decision: the pool ends. `for_job`: the job whose units an eviction frees;
    `expires_at` / `chain_started_at`: what an expiry or the chain limit was judged on.
    """

    job_id: str
    reason: WarmPoolTerminationReason
    billable_seconds: int
    rule: Rule | None = None
    for_job: str | None = None
    expires_at: float | None = None
    chain_started_at: float | None = None

    def __post_init__(self) -> None:
        if self.rule is None:  # one rule per termination reason
            upcast.fill(self, rule=upcast.pool_termination(self.reason))


class WarmPoolKeepAliveUpdated(Request, frozen=True, tag="warm_pool.keep_alive_updated"):
    """A user changed a pool's keep-alive; 0 terminates it.

    With `pass_decides_expiry` the next pass decides the pool's new expiry and
    records it (a `WarmPoolAvailable` restatement). Records without it (older logs)
    had the fold apply the expiry at once; `core.upcast` replays them that way.
    """

    job_id: str
    keep_alive_seconds: int
    pass_decides_expiry: bool = False


class ClockTicked(Event, frozen=True, tag="clock.ticked"):
    """Time passes: lets the pass expire pools and time out attempts on replay too."""
