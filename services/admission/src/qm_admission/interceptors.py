"""One interceptor: every RPC's errors become gRPC statuses, and every RPC is logged.

Each status comes from `qm_admission.errors.wire_status`: a message, the field in
the trailing metadata `x-qm-field`, and a `google.rpc.Status` with typed details.
- `RequestRejected`: its code and field;
- a bad `next_token` or filter from the read model: INVALID_ARGUMENT;
- a read whose own deadline passed while it waited: DEADLINE_EXCEEDED;
- transient trouble (log or read model behind or unreachable): UNAVAILABLE;
- bytes that are no message of the RPC's request type: INVALID_ARGUMENT, before
  authentication (gRPC would answer UNKNOWN from inside its deserializer);
- anything else: logged with its traceback, INTERNAL to the client.

Server-streaming RPCs come in two styles: async generators (ours) and coroutines
that `context.write` (grpc's health `Watch`); each is wrapped in its own style,
since gRPC refuses to mix them.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from qm_admission.errors import (
    FIELD_KEY,
    DeadlineReached,
    RequestRejected,
    TransientAdmissionError,
    WireStatus,
    rejected_status,
    wire_status,
)
from quartermaster.bus.errors import TransientBusError
from quartermaster.store.errors import (
    InvalidFilterError,
    InvalidNextTokenError,
    TransientStoreError,
)

log = logging.getLogger(__name__)

__all__ = [
    "FIELD_KEY",
    "TRANSIENT_ERRORS",
    "ErrorInterceptor",
    "Streaming",
    "Unary",
    "WrappingInterceptor",
]
TRANSIENT_ERRORS = (TransientAdmissionError, TransientBusError, TransientStoreError, TimeoutError)

Unary = Callable[[Any, Any], Awaitable[Any]]
Streaming = Callable[[Any, Any], AsyncIterator[Any]]


class Undecodable:
    """A request whose bytes do not parse as the RPC's message type."""

    def __init__(self, error: str) -> None:
        self.error = error


def tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """`deserializer` that answers `Undecodable` instead of raising."""
    if deserializer is None:
        return None
    parse = deserializer

    def decode(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError as err:
            return Undecodable(str(err))

    return decode


def rewrap(
    handler: Any,
    unary: Callable[[Unary], Unary],
    stream: Callable[[Streaming], Streaming],
    *,
    decode: Callable[[Any], Any] = lambda deserializer: deserializer,
) -> Any:
    """The same RPC handler with its behaviour (unary and server-streaming RPCs) and,
    through `decode`, its request deserializer wrapped."""
    if handler is None:
        return None
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            unary(handler.unary_unary),
            request_deserializer=decode(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    if handler.unary_stream is not None:
        behavior = handler.unary_stream
        # A coroutine that writes through the context is wrapped like a unary call.
        wrapped = stream(behavior) if inspect.isasyncgenfunction(behavior) else unary(behavior)
        return grpc.unary_stream_rpc_method_handler(
            wrapped,
            request_deserializer=decode(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
    return handler


class WrappingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """An interceptor that wraps the behaviour of each RPC (subclasses say how).

    The wrapped handler of a method is built once and kept while the handler below
    stays the same object (gRPC's registered handlers do; so do these cached ones),
    not rebuilt on every call.
    """

    def skips(self, method: str) -> bool:
        """RPCs served unwrapped."""
        return False

    def decode(self, deserializer: Any) -> Any:
        return deserializer

    def unary(self, method: str, behavior: Unary) -> Unary:
        raise NotImplementedError

    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        raise NotImplementedError

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        method: str = handler_call_details.method
        handler = await continuation(handler_call_details)
        if self.skips(method):
            return handler
        cache: dict[str, tuple[Any, Any]] = self.__dict__.setdefault("_wrapped", {})
        known = cache.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = rewrap(
            handler,
            lambda behavior: self.unary(method, behavior),
            lambda behavior: self.streaming(method, behavior),
            decode=self.decode,
        )
        if handler is not None:
            cache[method] = (handler, wrapped)
        return wrapped


class ErrorInterceptor(WrappingInterceptor):
    def decode(self, deserializer: Any) -> Any:
        return tolerant(deserializer)  # outermost: its deserializer is the one gRPC calls

    def unary(self, method: str, behavior: Unary) -> Unary:
        return _unary(method, behavior)

    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        return _streaming(method, behavior)


async def _refuse_undecodable(method: str, request: Any, context: Any) -> None:
    if isinstance(request, Undecodable):
        log.info("rpc rejected method=%s: undecodable request: %s", method, request.error)
        await _send(
            context,
            wire_status(
                "INVALID_ARGUMENT",
                "",
                f"the request is not a valid message of {method}: {request.error}",
            ),
        )


def _unary(method: str, behavior: Unary) -> Unary:
    async def call(request: Any, context: Any) -> Any:
        await _refuse_undecodable(method, request, context)
        started = time.perf_counter()
        try:
            response = await behavior(request, context)
        except Exception as err:
            await _abort(method, context, err)
            raise  # unreachable: abort raises
        log.debug("rpc ok method=%s ms=%.1f", method, (time.perf_counter() - started) * 1e3)
        return response

    return call


def _streaming(method: str, behavior: Streaming) -> Streaming:
    async def call(request: Any, context: Any) -> AsyncIterator[Any]:
        await _refuse_undecodable(method, request, context)
        try:
            async for item in behavior(request, context):
                yield item
        except Exception as err:
            await _abort(method, context, err)
            raise

    return call


async def _send(context: Any, status: WireStatus) -> None:
    await context.abort(status.code, status.message, trailing_metadata=status.trailing_metadata)


async def _abort(method: str, context: Any, err: Exception) -> None:
    if isinstance(err, grpc.aio.AbortError):
        raise err  # the servicer chose its status already
    if isinstance(err, RequestRejected):
        log.info(
            "rpc rejected method=%s code=%s field=%s: %s",
            method,
            err.code.value,
            err.field,
            err.message,
        )
        await _send(context, rejected_status(err))
    if isinstance(err, InvalidNextTokenError):
        await _send(context, wire_status("INVALID_ARGUMENT", "next_token", str(err)))
    if isinstance(err, InvalidFilterError):
        await _send(context, wire_status("INVALID_ARGUMENT", "", str(err)))
    if isinstance(err, DeadlineReached):
        log.info("rpc deadline method=%s: %s", method, err)
        await _send(context, wire_status("DEADLINE_EXCEEDED", "", str(err)))
    if isinstance(err, TRANSIENT_ERRORS):
        log.warning("rpc unavailable method=%s: %s", method, err)
        await _send(context, wire_status("UNAVAILABLE", "", f"try again: {err}"))
    log.exception("rpc failed method=%s", method, exc_info=err)
    await _send(context, wire_status("INTERNAL", "", "internal error (logged by the server)"))
