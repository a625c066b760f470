"""Which rule made a decision: one code per rule of spec/semantics.md (section 9).

Every decision event carries a `rule` and the inputs that rule looked at, so an
audit reads why from the log itself instead of re-deriving it from the state.
"""

from __future__ import annotations

from enum import StrEnum


class Rule(StrEnum):
    # -- placing a job (section 4) --
    OWN_QUOTA = "OWN_QUOTA"  # 4.2: dispatched within its share's own limit
    BORROWED = "BORROWED"  # 4.3: dispatched on idle units other shares lend
    # -- preempting a job (section 4) --
    # Each preemption also records the victim's seconds of work at risk (equal
    # priorities: the least goes first; JobPreemptionRequested.seconds_at_risk).
    RECLAIM = "RECLAIM"  # 4.4: a share below its limit takes back units a borrower holds
    IN_SHARE = "IN_SHARE"  # 4.5: a strictly higher-priority job of the same share
    LIMIT_LOWERED = "LIMIT_LOWERED"  # 4.6: units above a lowered limit, needed elsewhere
    # -- warm pools (section 5) --
    POOL_MATCH = "POOL_MATCH"  # a matching job takes an Available pool
    POOL_EVICTED = "POOL_EVICTED"  # an Available pool ends to free units for a job
    KEEP_ALIVE = "KEEP_ALIVE"  # a pool is Available for its job's keep-alive period
    EXPIRED = "EXPIRED"  # the keep-alive period is over
    USER_TERMINATED = "USER_TERMINATED"  # a user set the keep-alive to 0
    CHAIN_LIMIT = "CHAIN_LIMIT"  # the chain of reuses reached its 28-day lifetime
    HOST_UNHEALTHY = "HOST_UNHEALTHY"  # a pool's host was lost or drained
    # -- attempts (section 2) --
    RETRY = "RETRY"  # retryStrategy allows another attempt
    RETRIES_EXHAUSTED = "RETRIES_EXHAUSTED"  # every attempt of retryStrategy is used
    EXIT_RULE = "EXIT_RULE"  # an evaluateOnExit rule with action EXIT matched
    TIMEOUT = "TIMEOUT"  # attemptDurationSeconds / MaxRuntimeInSeconds passed
    CAPACITY_FAILURE = "CAPACITY_FAILURE"  # a host went silent: its capacity is lost
    MISCONFIGURATION = "MISCONFIGURATION"  # the job can never fit
