"""Bus adapters: the event log, command consumers and leases over NATS JetStream."""

from quartermaster.bus.consumer import ConsumedMessage, DurableConsumer
from quartermaster.bus.entry import LogEntry
from quartermaster.bus.errors import (
    BatchAppendError,
    BusError,
    FencedAppendError,
    PermanentBatchAppendError,
    PermanentBusError,
    TransientBatchAppendError,
    TransientBusError,
)
from quartermaster.bus.jetstream import BatchItem, JetStreamLog
from quartermaster.bus.lease import KvLease

__all__ = [
    "BatchAppendError",
    "BatchItem",
    "BusError",
    "ConsumedMessage",
    "DurableConsumer",
    "FencedAppendError",
    "JetStreamLog",
    "KvLease",
    "LogEntry",
    "PermanentBatchAppendError",
    "PermanentBusError",
    "TransientBatchAppendError",
    "TransientBusError",
]
