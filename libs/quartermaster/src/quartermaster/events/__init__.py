"""One home for every event: a tagged union with one reused encoder and decoder."""

from __future__ import annotations

from typing import TypeAlias

import msgspec

from quartermaster.events.base import (
    CapacityLimit,
    Event,
    FailureClass,
    SharingStrategy,
    State,
    WarmPoolTerminationReason,
)
from quartermaster.events.config import (
    JobQueueCreated,
    JobQueueUpdated,
    QuotaShareCreated,
    QuotaShareDeleted,
    QuotaShareUpdated,
    SchedulingPolicyCreated,
    ServiceEnvironmentCreated,
    ServiceEnvironmentUpdated,
)
from quartermaster.events.hosts import (
    HostDrained,
    HostHeartbeat,
    HostLost,
    HostRegistered,
    HostUndrained,
)
from quartermaster.events.jobs import (
    EvaluateOnExit,
    JobCheckpointed,
    JobDispatched,
    JobFailed,
    JobFinallyFailed,
    JobPreemptionRequested,
    JobPriorityUpdated,
    JobRetried,
    JobRunning,
    JobStarting,
    JobStatusReasonSet,
    JobStopConfirmed,
    JobSubmitted,
    JobSucceeded,
    JobTerminationRequested,
    JobTimedOut,
    StartPhases,
    WarmPoolKey,
)
from quartermaster.events.pools import (
    ClockTicked,
    WarmPoolAvailable,
    WarmPoolInUse,
    WarmPoolKeepAliveUpdated,
    WarmPoolReused,
    WarmPoolTerminated,
)
from quartermaster.events.reasons import Rule
from quartermaster.events.resources import (
    JobQueueDeleted,
    ResourceKind,
    ResourceTagged,
    ResourceUntagged,
    SchedulingPolicyDeleted,
    SchedulingPolicyUpdated,
    ServiceEnvironmentDeleted,
)
from quartermaster.events.upcast import same_decision

AnyEvent: TypeAlias = (
    ServiceEnvironmentCreated
    | ServiceEnvironmentUpdated
    | SchedulingPolicyCreated
    | JobQueueCreated
    | JobQueueUpdated
    | QuotaShareCreated
    | QuotaShareUpdated
    | QuotaShareDeleted
    | JobSubmitted
    | JobPriorityUpdated
    | JobTerminationRequested
    | JobDispatched
    | JobPreemptionRequested
    | JobTimedOut
    | JobStatusReasonSet
    | JobStopConfirmed
    | JobStarting
    | JobRunning
    | JobCheckpointed
    | JobSucceeded
    | JobFailed
    | JobRetried
    | JobFinallyFailed
    | HostRegistered
    | HostHeartbeat
    | HostLost
    | HostDrained
    | HostUndrained
    | WarmPoolAvailable
    | WarmPoolInUse
    | WarmPoolReused
    | WarmPoolTerminated
    | WarmPoolKeepAliveUpdated
    | ClockTicked
    | ServiceEnvironmentDeleted
    | SchedulingPolicyUpdated
    | SchedulingPolicyDeleted
    | JobQueueDeleted
    | ResourceTagged
    | ResourceUntagged
)

EVENT_TYPES: tuple[type[Event], ...] = AnyEvent.__args__

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyEvent)
_json_decoder = msgspec.json.Decoder(AnyEvent)


def encode(event: Event) -> bytes:
    """Wire form of an event on the log (msgpack)."""
    return _encoder.encode(event)


def decode(data: bytes) -> AnyEvent:
    """Decode one event from the log; raises msgspec.DecodeError on garbage."""
    return _decoder.decode(data)


def to_json(event: Event) -> bytes:
    """Readable form for audits and fixtures."""
    return msgspec.json.encode(event)


def from_json(data: bytes | str) -> AnyEvent:
    return _json_decoder.decode(data)


def tag_of(event: Event) -> str:
    return type(event).__struct_config__.tag  # type: ignore[return-value]


__all__ = [
    "EVENT_TYPES",
    "AnyEvent",
    "CapacityLimit",
    "ClockTicked",
    "EvaluateOnExit",
    "Event",
    "FailureClass",
    "HostDrained",
    "HostHeartbeat",
    "HostLost",
    "HostRegistered",
    "HostUndrained",
    "JobCheckpointed",
    "JobDispatched",
    "JobFailed",
    "JobFinallyFailed",
    "JobPreemptionRequested",
    "JobPriorityUpdated",
    "JobQueueCreated",
    "JobQueueDeleted",
    "JobQueueUpdated",
    "JobRetried",
    "JobRunning",
    "JobStarting",
    "JobStatusReasonSet",
    "JobStopConfirmed",
    "JobSubmitted",
    "JobSucceeded",
    "JobTerminationRequested",
    "JobTimedOut",
    "QuotaShareCreated",
    "QuotaShareDeleted",
    "QuotaShareUpdated",
    "ResourceKind",
    "ResourceTagged",
    "ResourceUntagged",
    "Rule",
    "SchedulingPolicyCreated",
    "SchedulingPolicyDeleted",
    "SchedulingPolicyUpdated",
    "ServiceEnvironmentCreated",
    "ServiceEnvironmentDeleted",
    "ServiceEnvironmentUpdated",
    "SharingStrategy",
    "StartPhases",
    "State",
    "WarmPoolAvailable",
    "WarmPoolInUse",
    "WarmPoolKeepAliveUpdated",
    "WarmPoolKey",
    "WarmPoolReused",
    "WarmPoolTerminated",
    "WarmPoolTerminationReason",
    "decode",
    "encode",
    "from_json",
    "same_decision",
    "tag_of",
    "to_json",
]
