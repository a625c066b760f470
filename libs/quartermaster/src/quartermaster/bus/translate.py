"""Turn nats-py exceptions into bus errors at the edge of the adapter."""

from __future__ import annotations

import nats.errors
import nats.js.errors

from quartermaster.bus.errors import BusError, PermanentBusError, TransientBusError

# What a call into nats-py may raise; adapters catch these and raise `bus_error(...)`.
NATS_FAILURES: tuple[type[BaseException], ...] = (nats.errors.Error, OSError, TimeoutError)

_TRANSIENT: tuple[type[BaseException], ...] = (
    TimeoutError,  # nats.errors.TimeoutError is one too
    OSError,
    nats.errors.NoRespondersError,
    nats.errors.NoServersError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionDrainingError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.SlowConsumerError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
    nats.js.errors.ServerError,
)


def bus_error(err: BaseException, doing: str) -> BusError:
    """The bus error for `err`, raised while `doing` (a short phrase for the message)."""
    if isinstance(err, BusError):
        return err
    detail = str(err) or type(err).__name__
    if isinstance(err, _TRANSIENT):
        return TransientBusError(f"{doing}: {detail}")
    return PermanentBusError(f"{doing}: {detail}")
