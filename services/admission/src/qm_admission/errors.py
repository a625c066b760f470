"""Errors of the admission service: one base, split into permanent and transient.

`RequestRejected` is the permanent kind a client sees as a gRPC status with the
offending field; transient errors (the read model lags) map to UNAVAILABLE, a
read whose own deadline passes first to DEADLINE_EXCEEDED. `wire_status` is the
one place a refusal becomes a gRPC status (message, field, `google.rpc.Status`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

import grpc
from google.protobuf import duration_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2


class Code(StrEnum):
    """gRPC status code names a rejection can carry (as in `ApiError.code`)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    OUT_OF_RANGE = "OUT_OF_RANGE"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"


class AdmissionError(Exception):
    """Base error of `qm_admission`."""


class PermanentAdmissionError(AdmissionError):
    """The request is wrong for the state as it is; retrying it unchanged fails again."""


class TransientAdmissionError(AdmissionError):
    """A dependency is behind or unreachable; the same request may succeed later."""


class RequestRejected(PermanentAdmissionError):
    """A request that must not be written, with the gRPC code and the offending field.

    `field` is the snake_case dotted path of the request field (payload keys keep
    their JSON spelling), e.g. `retry_strategy.attempts` or
    `service_request_payload.ResourceConfig.InstanceType`; empty when no one field is at fault.
    """

    def __init__(self, code: Code, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.code = code
        self.field = field
        self.message = message


class ReadModelBehind(TransientAdmissionError):
    """The projection did not reach the position a read must see in time."""


def invalid(field: str, message: str) -> RequestRejected:
    return RequestRejected(Code.INVALID_ARGUMENT, field, message)


def not_found(field: str, message: str) -> RequestRejected:
    return RequestRejected(Code.NOT_FOUND, field, message)


def already_exists(field: str, message: str) -> RequestRejected:
    return RequestRejected(Code.ALREADY_EXISTS, field, message)


def failed_precondition(field: str, message: str) -> RequestRejected:
    return RequestRejected(Code.FAILED_PRECONDITION, field, message)


class DeadlineReached(TransientAdmissionError):
    """The call's own deadline passed while a read waited for the read model."""


# ---- the wire form of every refusal ----------------------------------------
#
# A refusal travels as a gRPC status whose details are a `google.rpc.Status`
# (trailing metadata `grpc-status-details-bin`, read by `grpc_status.rpc_status`):
# always an `ErrorInfo` (reason = the code, metadata `field`), plus `BadRequest`
# field violations for bad input, `PreconditionFailure` for state conflicts,
# `ResourceInfo` for unknown or duplicate names, `RetryInfo` for transient trouble.
# The message and the `x-qm-field` metadata stay as they were for older clients.

ERROR_DOMAIN = "quartermaster.qm.v1"
FIELD_KEY = "x-qm-field"
DETAILS_KEY = "grpc-status-details-bin"  # as grpc_status.rpc_status reads it
RETRY_DELAY_SECONDS = 1


class WireStatus(NamedTuple):
    """What `context.abort` is given for one refusal."""

    code: grpc.StatusCode
    message: str
    trailing_metadata: tuple[tuple[str, str | bytes], ...]


def _error_info(reason: str, field: str) -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(
        reason=reason, domain=ERROR_DOMAIN, metadata={"field": field} if field else {}
    )


def _details(code: str, field: str, message: str) -> list[Message]:
    details: list[Message] = [_error_info(code, field)]
    if code in (Code.INVALID_ARGUMENT, Code.OUT_OF_RANGE):
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=field, description=message, reason=code
        )
        details.append(error_details_pb2.BadRequest(field_violations=[violation]))
    elif code == Code.FAILED_PRECONDITION:
        failure = error_details_pb2.PreconditionFailure.Violation(
            type="STATE", subject=field, description=message
        )
        details.append(error_details_pb2.PreconditionFailure(violations=[failure]))
    elif code in (Code.NOT_FOUND, Code.ALREADY_EXISTS):
        details.append(error_details_pb2.ResourceInfo(resource_name=field, description=message))
    elif code == grpc.StatusCode.UNAVAILABLE.name:
        delay = duration_pb2.Duration(seconds=RETRY_DELAY_SECONDS)
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    return details


def wire_status(code: str, field: str, message: str) -> WireStatus:
    """The status for a refusal with `code` (a gRPC status name) at `field` ("" = none)."""
    text = f"{field}: {message}" if field else message
    grpc_code = grpc.StatusCode[code]
    status = status_pb2.Status(code=grpc_code.value[0], message=text)
    for detail in _details(code, field, message):
        status.details.add().Pack(detail)
    metadata: list[tuple[str, str | bytes]] = [(DETAILS_KEY, status.SerializeToString())]
    if field:
        metadata.append((FIELD_KEY, field))
    return WireStatus(grpc_code, text, tuple(metadata))


def rejected_status(err: RequestRejected) -> WireStatus:
    return wire_status(err.code.value, err.field, err.message)
