"""Managed warm pools' rules (spec section 5): which pool a job may take, and how long
a pool lives. The pass applies them and records the results in its decisions; the
fold only applies what those decisions carry.
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import msgspec

from quartermaster.core.model import Job, WarmPool
from quartermaster.core.state import State
from quartermaster.events import Rule, WarmPoolKey, WarmPoolTerminationReason

MAX_CHAIN_SECONDS = 28 * 24 * 3600  # a chain of reuses lives at most this long


# ---- match ---------------------------------------------------------------------------


def match_key(key: WarmPoolKey) -> WarmPoolKey:
    """The key as reuse compares it: security groups, subnets and session tag keys
    match as sets, so they are kept as sorted sets; every other field must be equal."""
    if _is_set(key.security_group_ids) and _is_set(key.subnets) and _is_set(key.session_tag_keys):
        return key  # already so (most keys: empty lists): no copy per submitted job
    return msgspec.structs.replace(
        key,
        security_group_ids=tuple(sorted(set(key.security_group_ids))),
        subnets=tuple(sorted(set(key.subnets))),
        session_tag_keys=tuple(sorted(set(key.session_tag_keys))),
    )


def _is_set(items: tuple[str, ...]) -> bool:
    """Sorted and without repeats."""
    return len(items) < 2 or all(a < b for a, b in pairwise(items))


def matches(pool: WarmPool, job: Job) -> bool:
    """May `job` take `pool`? Equal match keys (both built by `match_key`), same size."""
    return pool.key == job.warm_pool_key and pool.count == job.count


def matching(state: State, env: str, job: Job) -> list[WarmPool]:
    """Available pools of the environment `job` may take, the one expiring first first."""
    pools = (state.pools[pid] for _, pid in state.available_pools[(env, job.unit)])
    return [pool for pool in pools if matches(pool, job)]


# ---- lifetime ------------------------------------------------------------------------


class Expiry(NamedTuple):
    expires_at: float
    rule: Rule  # KEEP_ALIVE, CHAIN_LIMIT or USER_TERMINATED


def chain_end(chain_started_at: float) -> float:
    return chain_started_at + MAX_CHAIN_SECONDS


def chain_over(chain_started_at: float, now: float) -> bool:
    """The chain has lived its 28 days: no pool may open on it any more."""
    return now >= chain_end(chain_started_at)


def opening(now: float, keep_alive_seconds: int, chain_started_at: float) -> Expiry:
    """A pool opening now is Available for the keep-alive, within the chain's lifetime."""
    return _clamped(now + keep_alive_seconds, chain_started_at, Rule.KEEP_ALIVE)


def restated(pool: WarmPool, keep_alive_seconds: int, requested_at: float) -> Expiry:
    """An Available pool's expiry after its keep-alive was set to `keep_alive_seconds`.

    Counted from when the pool became Available, and never before the request: a
    pool is billed for the time it sat Available until it was changed.
    """
    assert pool.available_since is not None
    rule = Rule.USER_TERMINATED if keep_alive_seconds == 0 else Rule.KEEP_ALIVE
    wanted = _clamped(pool.available_since + keep_alive_seconds, pool.chain_started_at, rule)
    return Expiry(max(requested_at, wanted.expires_at), wanted.rule)


def _clamped(expires_at: float, chain_started_at: float, rule: Rule) -> Expiry:
    end = chain_end(chain_started_at)
    if end < expires_at:
        return Expiry(end, Rule.CHAIN_LIMIT)
    return Expiry(expires_at, rule)


def ending(
    pool: WarmPool, hosts_healthy: bool, now: float
) -> tuple[WarmPoolTerminationReason, float] | None:
    """Why an Available pool ends now, and until when it is billed; None: it goes on."""
    assert pool.expires_at is not None
    if not hosts_healthy:
        return WarmPoolTerminationReason.HOST_UNHEALTHY, now
    if pool.expires_at > now:
        return None
    until = min(now, pool.expires_at)
    if pool.user_terminated:
        return WarmPoolTerminationReason.USER_TERMINATED, until
    if pool.expires_at >= chain_end(pool.chain_started_at):
        return WarmPoolTerminationReason.MAX_LIFETIME_REACHED, until
    return WarmPoolTerminationReason.EXPIRED, until


def billable(pool: WarmPool, until: float) -> int:
    """`ResourceRetainedBillableTimeInSeconds`: whole seconds it sat Available."""
    since = pool.available_since if pool.available_since is not None else until
    return max(0, int(until - since))
