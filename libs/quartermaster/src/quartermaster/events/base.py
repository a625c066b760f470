"""Shared building blocks of every event: the tagged base and small value types.

Events are facts (past tense), frozen and tagged with a stable string. A schema
grows only by adding fields with defaults; a breaking change gets a new tag.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec


class Event(msgspec.Struct, frozen=True, tag_field="type", kw_only=True, gc=False):
    """Base of every event. `at` is the fact's wall-clock time in epoch seconds.

    Time enters the core only through this field (and clock ticks), so a replay
    of the log reproduces every decision byte for byte.

    Not tracked by the garbage collector (`gc=False`): an event holds only immutable
    values and its own tags, never a cycle; a log read into memory is then no work for
    the collector, and decoding one creates nothing it counts.
    """

    at: float


class Request(Event, frozen=True, kw_only=True):
    """Base of the events a user's request writes: who asked is part of the fact.

    `principal` is the authenticated subject admission served ("anonymous" on a
    plaintext development stack; "" in logs written before it was recorded).
    """

    principal: str = ""


class CapacityLimit(msgspec.Struct, frozen=True):
    capacity_unit: str
    max_capacity: int


class State(StrEnum):
    ENABLED = "ENABLED"
    DISABLED = "DISABLED"


class SharingStrategy(StrEnum):
    RESERVE = "RESERVE"
    LEND = "LEND"
    LEND_AND_BORROW = "LEND_AND_BORROW"


class FailureClass(StrEnum):
    """Why an attempt failed: decides retries and whether the hosts stay warm."""

    ALGORITHM_ERROR = "ALGORITHM_ERROR"
    CLIENT_ERROR = "CLIENT_ERROR"
    INFRASTRUCTURE_ERROR = "INFRASTRUCTURE_ERROR"


class WarmPoolTerminationReason(StrEnum):
    EXPIRED = "EXPIRED"
    USER_TERMINATED = "USER_TERMINATED"
    HOST_UNHEALTHY = "HOST_UNHEALTHY"
    CAPACITY_RECLAIMED = "CAPACITY_RECLAIMED"
    MAX_LIFETIME_REACHED = "MAX_LIFETIME_REACHED"
