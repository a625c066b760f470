"""Refusals as AWS clients parse them: one table per protocol family.

A `RequestRejected` keeps its meaning: bad input, an unknown or duplicate name,
a state conflict are the client's (400; "Object already exists" for duplicates,
which the SDK's helpers look for), a denial is 403, trouble that passes (the log
or read model behind or unreachable) is 503 for the client to retry, and only a
real fault is 500. The field is named in AWS's camelCase at the head of the message.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from qm_admission.errors import Code, RequestRejected


class AwsError(NamedTuple):
    status: int
    code: str  # the error type (x-amzn-ErrorType, `__type`, the query protocol's Code)
    message: str


def aws_field(field: str) -> str:
    """`retry_strategy.attempts` -> `retryStrategy.attempts` (payload keys as they are)."""
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), field)


def _message(err: RequestRejected) -> str:
    text = f"{aws_field(err.field)}: {err.message}" if err.field else err.message
    if err.code == Code.ALREADY_EXISTS:
        return f"Object already exists: {text}"
    return text


_BATCH = {
    Code.PERMISSION_DENIED: (403, "AccessDeniedException"),
    Code.UNAUTHENTICATED: (403, "UnrecognizedClientException"),
}
_SAGEMAKER = {
    Code.NOT_FOUND: (400, "ValidationException"),  # as SageMaker answers an unknown name
    Code.ALREADY_EXISTS: (400, "ResourceInUse"),
    Code.RESOURCE_EXHAUSTED: (400, "ResourceLimitExceeded"),
    Code.PERMISSION_DENIED: (403, "AccessDeniedException"),
    Code.UNAUTHENTICATED: (403, "UnrecognizedClientException"),
}
_QUERY = {
    Code.NOT_FOUND: (404, "NoSuchEntity"),
    Code.PERMISSION_DENIED: (403, "AccessDenied"),
    Code.UNAUTHENTICATED: (403, "InvalidClientTokenId"),
}
CLIENT_FAULT = {
    "batch": "ClientException",
    "sagemaker": "ValidationException",
    "query": "ValidationError",
}
SERVER_FAULT = {
    "batch": "ServerException",
    "sagemaker": "InternalFailure",
    "query": "InternalFailure",
}
UNAVAILABLE = {
    "batch": "ServerException",
    "sagemaker": "ServiceUnavailable",
    "query": "ServiceUnavailable",
}
_TABLES = {"batch": _BATCH, "sagemaker": _SAGEMAKER, "query": _QUERY}


def rejected(family: str, err: RequestRejected) -> AwsError:
    status, code = _TABLES[family].get(err.code, (400, CLIENT_FAULT[family]))
    return AwsError(status, code, _message(err))


def client_fault(family: str, message: str) -> AwsError:
    return AwsError(400, CLIENT_FAULT[family], message)


def unavailable(family: str, message: str) -> AwsError:
    return AwsError(503, UNAVAILABLE[family], f"try again: {message}")


def server_fault(family: str) -> AwsError:
    return AwsError(500, SERVER_FAULT[family], "internal error (logged by the server)")
