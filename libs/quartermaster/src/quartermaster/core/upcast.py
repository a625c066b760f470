"""Events recorded before a rule left the fold, folded as the decision they implied.

A keep-alive update without `pass_decides_expiry` was written when the fold set
the pool's new expiry itself. Replaying such a log must rebuild the state it
had, so the decision is re-made here with the rule as it stood then, frozen
(a change to today's rule in `warm_pools` must not rewrite old history).
"""

from __future__ import annotations

from quartermaster import events as ev
from quartermaster.core.model import WarmPool
from quartermaster.events.upcast import LEGACY_MAX_CHAIN_SECONDS


def keep_alive_v1(pool: WarmPool, e: ev.WarmPoolKeepAliveUpdated) -> ev.WarmPoolAvailable:
    """The expiry a v1 keep-alive update gave an Available pool, as a pass decision."""
    assert pool.available_since is not None
    chain_end = pool.chain_started_at + LEGACY_MAX_CHAIN_SECONDS
    wanted = pool.available_since + e.keep_alive_seconds
    if e.keep_alive_seconds == 0:
        rule = ev.Rule.USER_TERMINATED
    elif chain_end < wanted:
        rule = ev.Rule.CHAIN_LIMIT
    else:
        rule = ev.Rule.KEEP_ALIVE
    return ev.WarmPoolAvailable(
        at=e.at,
        job_id=pool.job_id,
        hosts=pool.hosts,
        expires_at=max(e.at, min(wanted, chain_end)),
        chain_id=pool.chain_id,
        chain_started_at=pool.chain_started_at,
        rule=rule,
        keep_alive_seconds=e.keep_alive_seconds,
    )
