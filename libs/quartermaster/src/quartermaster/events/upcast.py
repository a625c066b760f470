"""Upcasters: decisions recorded before they carried their rule, read as if they did.

A decision event grew a `rule` field (and its inputs) with a None default. Where
an old record still says which rule made it (a preemption's reason text, a
pool's termination reason), these functions fill it in on decode, from the
formats those logs were written in (frozen here: never change them). Inputs that
an old record does not hold stay None, which `same_decision` reads as "not
recorded" when an audit compares a recorded decision with a re-derived one.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from quartermaster.events.base import Event, WarmPoolTerminationReason
from quartermaster.events.reasons import Rule

# The chain limit when the logs without `rule` were written (spec section 5).
LEGACY_MAX_CHAIN_SECONDS = 28 * 24 * 3600

_RECLAIMED = re.compile(r"^Preempted: capacity reclaimed by quota share (?P<share>[A-Za-z0-9_-]+)")
_IN_SHARE = "Preempted: in-share preemption by higher-priority job "

_POOL_RULES = {
    WarmPoolTerminationReason.EXPIRED: Rule.EXPIRED,
    WarmPoolTerminationReason.USER_TERMINATED: Rule.USER_TERMINATED,
    WarmPoolTerminationReason.HOST_UNHEALTHY: Rule.HOST_UNHEALTHY,
    WarmPoolTerminationReason.CAPACITY_RECLAIMED: Rule.POOL_EVICTED,
    WarmPoolTerminationReason.MAX_LIFETIME_REACHED: Rule.CHAIN_LIMIT,
}


def preemption(reason: str) -> tuple[Rule | None, str | None]:
    """(rule, lender share) of a preemption recorded with only its reason text."""
    found = _RECLAIMED.match(reason)
    if found is not None:
        return Rule.RECLAIM, found.group("share")
    if reason.startswith(_IN_SHARE):
        return Rule.IN_SHARE, None
    return None, None


def pool_termination(reason: WarmPoolTerminationReason) -> Rule:
    """The rule behind a pool's termination reason (one to one)."""
    return _POOL_RULES[reason]


def pool_opening(expires_at: float, chain_started_at: float) -> Rule:
    """A pool opened before `rule` was recorded: clamped by the chain, or its keep-alive."""
    if expires_at >= chain_started_at + LEGACY_MAX_CHAIN_SECONDS:
        return Rule.CHAIN_LIMIT
    return Rule.KEEP_ALIVE


def fill(event: Event, **fields: Any) -> None:
    """Set fields of a frozen event while it is being built (decode or construction)."""
    for name, value in fields.items():
        msgspec.structs.force_setattr(event, name, value)


# Fields decisions gained with their reasons; None in a record means "not recorded".
REASON_FIELDS = frozenset(
    {
        "rule",
        "share_units",
        "share_limit",
        "lender_share",
        "units_borrowed",
        "priority_gap",
        "seconds_at_risk",
        "timeout_seconds",
        "instances_needed",
        "instances_allowed",
        "attempts_allowed",
        "attempts_used",
        "exit_rule_index",
        "keep_alive_seconds",
        "for_job",
        "expires_at",
        "chain_started_at",
        "last_heartbeat_at",
        "heartbeat_timeout_seconds",
    }
)


def same_decision(recorded: Event, rederived: Event) -> bool:
    """Equal, except for reason fields the recorded event left None (not recorded then).

    A replay audit of a log written before decisions carried their reasons compares
    what the log holds; a log written since compares every field.
    """
    if type(recorded) is not type(rederived):
        return False
    for name in recorded.__struct_fields__:
        want = getattr(recorded, name)
        if want is None and name in REASON_FIELDS:
            continue
        if want != getattr(rederived, name):
            return False
    return True
