"""AWS Batch's rest-json operations, each the qm.v1 RPC of the same name.

Every operation is `POST /v1/<operation in lower case>` with a JSON body, except
the tags (`/v1/tags/{resourceArn}`: GET lists, POST tags, DELETE with `tagKeys`
in the query untags). An operation names its RPC; the request comes from the body
by `inbound.request_from`, and the answer is the RPC's response in boto3's shape
(`quartermaster.client.shapes.aws_output`, the one home of those shapes, which also
rebuilds the few outputs AWS lays out differently from their qm.v1 message). Members
AWS defines that Quartermaster has no use for (fair-share identifiers, compute
environments) are refused by name rather than ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from google.protobuf.message import Message

from qm_admission.errors import invalid
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client.shapes import aws_output

Body = dict[str, Any]


class Operation(NamedTuple):
    name: str
    rpc: str  # the gRPC method path: its permission, its servicer
    request: type[Message]
    render: Callable[[Any], Body]
    unsupported: tuple[tuple[str, str], ...] = ()  # (member, why) refused when given


# What a client that sends every member gives for one it does not use: each of its type
# (an empty string is no policy object).
_UNUSED: dict[str, object] = {
    "shareIdentifier": "",
    "fairsharePolicy": {},
    "computeEnvironmentOrder": [],
    "serviceEnvironmentOrder": [],
    "jobStateTimeLimitActions": [],
}


def _refuse_unsupported(op: Operation, body: Body) -> Body:
    for member, why in op.unsupported:
        value = body.get(member)
        if value is not None and (type(value) is not type(_UNUSED.get(member)) or value):
            raise invalid(member, why)
    return {k: v for k, v in body.items() if k not in dict(op.unsupported)}


_NO_FAIRSHARE = "is for fair-share scheduling; Quartermaster queues are quota-managed"
_NO_COMPUTE = "is for ECS and EKS jobs; Quartermaster queues run service jobs only"


def _op(
    name: str,
    service: str,
    render: Callable[[Any], Body] = aws_output,
    unsupported: tuple[tuple[str, str], ...] = (),
) -> Operation:
    return Operation(
        name, f"/qm.v1.{service}/{name}", getattr(pb, f"{name}Request"), render, unsupported
    )


_Q = "QuotaManagement"
_J = "ServiceJobs"
OPERATIONS: tuple[Operation, ...] = (
    _op(
        "SubmitServiceJob",
        _J,
        unsupported=(("shareIdentifier", f"{_NO_FAIRSHARE}: name the share in quotaShareName"),),
    ),
    _op("DescribeServiceJob", _J),
    _op("ListServiceJobs", _J),
    _op("UpdateServiceJob", _J),
    _op("TerminateServiceJob", _J),
    _op("GetJobQueueSnapshot", _Q),
    _op("CreateServiceEnvironment", _Q),
    _op("DescribeServiceEnvironments", _Q),
    _op("UpdateServiceEnvironment", _Q),
    _op("DeleteServiceEnvironment", _Q),
    _op("CreateSchedulingPolicy", _Q, unsupported=(("fairsharePolicy", _NO_FAIRSHARE),)),
    _op("ListSchedulingPolicies", _Q),
    _op("DescribeSchedulingPolicies", _Q),
    _op("UpdateSchedulingPolicy", _Q, unsupported=(("fairsharePolicy", _NO_FAIRSHARE),)),
    _op("DeleteSchedulingPolicy", _Q),
    _op(
        "CreateJobQueue",
        _Q,
        unsupported=(
            ("computeEnvironmentOrder", _NO_COMPUTE),
            ("jobStateTimeLimitActions", "is not supported: jobs wait until they can run"),
        ),
    ),
    _op("DescribeJobQueues", _Q),
    _op(
        "UpdateJobQueue",
        _Q,
        unsupported=(
            ("computeEnvironmentOrder", _NO_COMPUTE),
            ("serviceEnvironmentOrder", "cannot change: a queue keeps its service environment"),
            ("jobStateTimeLimitActions", "is not supported: jobs wait until they can run"),
        ),
    ),
    _op("DeleteJobQueue", _Q),
    _op("CreateQuotaShare", _Q),
    _op("DescribeQuotaShare", _Q),
    _op("ListQuotaShares", _Q),
    _op("UpdateQuotaShare", _Q),
    _op("DeleteQuotaShare", _Q),
)
BY_PATH: dict[str, Operation] = {f"/v1/{op.name.lower()}": op for op in OPERATIONS}
TAGS: dict[str, Operation] = {
    "GET": _op("ListTagsForResource", _Q),
    "POST": _op("TagResource", _Q),
    "DELETE": _op("UntagResource", _Q),
}
TAGS_PREFIX = "/v1/tags/"


def body_for(op: Operation, body: Body) -> Body:
    """The JSON the operation's request is read from (unsupported members refused)."""
    return _refuse_unsupported(op, body) if op.unsupported else body
