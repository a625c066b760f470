"""Errors of the admission service: one base, split into permanent and transient.

`RequestRejected` is the permanent kind a client sees as a gRPC status with the
offending field; transient errors (the read model lags) map to UNAVAILABLE.
"""

from __future__ import annotations

from enum import StrEnum


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
