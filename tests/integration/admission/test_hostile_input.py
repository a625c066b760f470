"""Hostile input never reaches storage as a crash (issue #7): real gRPC, JetStream, Postgres.

NUL in any string of any request, numbers out of range and forged page tokens are
INVALID_ARGUMENT naming the field, and nothing is written: the stream's last
sequence and the client-token table stay as they were, and the projection keeps up.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import grpc
import msgspec
import pytest
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

from qm_admission.consistency import MIN_SEQ_KEY
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.store import Projector, ReadModel
from quartermaster.store.errors import InvalidNextTokenError

from .conftest import SCHEMA, Client, Starter
from .test_admission_server import PAYLOAD, UNIT, describe, field_of, job, set_up_queue, submit

NUL = "a\x00b"
UNKNOWN_ENUM = 99
INVALID = grpc.StatusCode.INVALID_ARGUMENT

RPCS: list[MethodDescriptor] = [
    method for service in pb.DESCRIPTOR.services_by_name.values() for method in service.methods
]


# ---- helpers --------------------------------------------------------------------------


async def refusal(c: Client, method: MethodDescriptor, request: Message) -> grpc.aio.AioRpcError:
    """Call any qm.v1 RPC by its descriptor; the error it must end with."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    reply = message_factory.GetMessageClass(method.output_type)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        if method.server_streaming:
            stream = c.channel.unary_stream(
                path, request_serializer=_serialize, response_deserializer=reply.FromString
            )
            async for _ in stream(request, timeout=20):
                pass
        else:
            unary = c.channel.unary_unary(
                path, request_serializer=_serialize, response_deserializer=reply.FromString
            )
            await unary(request, timeout=20)
    return raised.value


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


async def rejected(call: Any) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value.code(), field_of(raised.value)


def hostile_fields(
    descriptor: Descriptor, prefix: str = ""
) -> Iterator[tuple[str, dict[str, Any]]]:
    """For every string and enum field reachable in a message (nested, repeated, map keys
    and values): the path the server must name, and the message as a dict with a NUL in
    that string (the second item of a list) or an undefined number in that enum."""
    for field in descriptor.fields:
        path = prefix + field.name
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            value_field = entry.fields_by_name["value"]
            yield f"{path}[{json.dumps(NUL)}]", {field.name: {NUL: _plain(value_field)}}
            for inner, value in _leaves(value_field, f'{path}["k"]'):
                yield inner, {field.name: {"k": value}}
        elif field.is_repeated and field.type != FieldDescriptor.TYPE_MESSAGE:
            for inner, value in _leaves(field, f"{path}[1]"):
                yield inner, {field.name: [_plain(field), value]}
        elif field.is_repeated:
            for inner, value in _leaves(field, f"{path}[0]"):
                yield inner, {field.name: [value]}
        else:
            for inner, value in _leaves(field, path):
                yield inner, {field.name: value}


def _leaves(field: FieldDescriptor, path: str) -> Iterator[tuple[str, Any]]:
    if field.type == FieldDescriptor.TYPE_STRING:
        yield path, NUL
    elif field.type == FieldDescriptor.TYPE_ENUM:
        yield path, UNKNOWN_ENUM
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        yield from hostile_fields(field.message_type, path + ".")


def _plain(field: FieldDescriptor) -> Any:
    """A harmless value of a field's type."""
    if field.type == FieldDescriptor.TYPE_STRING:
        return "ok"
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return {}
    return 0


class Untouched:
    """What a rejected request must not change: the log and the client-token claims."""

    def __init__(self, c: Client, db: asyncpg.Connection) -> None:
        self.c, self.db = c, db

    async def now(self) -> tuple[int, int]:
        tokens = await self.db.fetchval(f"SELECT count(*) FROM {SCHEMA}.client_tokens")
        return await self.c.log.last_seq(), int(tokens)


@pytest.fixture
async def db(pg_dsn: str) -> Any:
    conn = await asyncpg.connect(pg_dsn)
    try:
        yield conn
    finally:
        await conn.close()


def inner_token(*parts: Any) -> str:
    """A token as the read model spells one, unsealed (what a forger can make)."""
    return base64.urlsafe_b64encode(msgspec.json.encode(list(parts))).decode().rstrip("=")


def raw_token(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def payload(**extra: Any) -> str:
    return json.dumps({"ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1}, **extra})


def resources(**fields: Any) -> str:
    return json.dumps({"ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1, **fields}})


def case_ids(cases: list[Any]) -> list[str]:
    return [f"{rpc.split('.')[1]}:{field or 'accepted'}" for rpc, _, field in cases]


# ---- the cases measured against a running stack ---------------------------------------


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (pb.DescribeServiceJobRequest(job_id=NUL), "job_id"),
        (
            pb.ListServiceJobsRequest(
                job_queue="q", filters=[pb.KeyValuesPair(name="JOB_NAME", values=[NUL])]
            ),
            "filters[0].values[0]",
        ),
        (
            pb.ListServiceJobsRequest(job_queue="q", next_token=inner_token("jobs", 1.0, NUL)),
            "next_token",
        ),
        (
            pb.ListServiceJobsRequest(
                job_queue="q", next_token=raw_token('["jobs",1' + "0" * 400 + ',"a"]')
            ),
            "next_token",
        ),
        (pb.ListWarmPoolsRequest(next_token=inner_token("pools", NUL)), "next_token"),
        (pb.ListQuotaSharesRequest(job_queue="q", next_token=NUL), "next_token"),
    ],
    ids=[
        "describe-nul-id",
        "job-name-filter-nul",
        "token-nul",
        "token-10e400",
        "pools-token-nul",
        "raw-nul-token",
    ],
)
async def test_the_measured_cases_are_invalid_argument_naming_the_field(
    admission: Client, request_: Message, field: str
) -> None:
    c = admission
    await set_up_queue(c)
    await submit(c)
    method = next(m for m in RPCS if m.input_type is request_.DESCRIPTOR)
    error = await refusal(c, method, request_)
    assert (error.code(), field_of(error)) == (INVALID, field), error.details()


# ---- NUL and undefined enums, every RPC, every field ----------------------------------


@pytest.mark.parametrize("method", RPCS, ids=[m.full_name for m in RPCS])
async def test_every_rpc_refuses_nul_or_an_undefined_enum_in_any_field(
    admission: Client, db: Any, method: MethodDescriptor
) -> None:
    c = admission
    untouched = Untouched(c, db)
    before = await untouched.now()
    cases = list(hostile_fields(method.input_type))
    assert cases, f"{method.full_name} has no string or enum field to check"
    request_class = message_factory.GetMessageClass(method.input_type)
    for path, doc in cases:
        request = json_format.ParseDict(doc, request_class())
        error = await refusal(c, method, request)
        assert (error.code(), field_of(error)) == (INVALID, path), (path, error.details())
    assert await untouched.now() == before


def test_the_walk_reaches_nested_repeated_and_map_fields() -> None:
    paths = {path for path, _ in hostile_fields(pb.SubmitServiceJobsRequest.DESCRIPTOR)}
    assert {
        "jobs[0].job_name",
        "jobs[0].retry_strategy.evaluate_on_exit[0].on_reason",
        "jobs[0].retry_strategy.evaluate_on_exit[0].action",
        'jobs[0].tags["a\\u0000b"]',
        'jobs[0].tags["k"]',
    } <= paths
    filters = {path for path, _ in hostile_fields(pb.ListServiceJobsRequest.DESCRIPTOR)}
    assert {"filters[0].values[1]", "filters[0].name", "job_status", "next_token"} <= filters


# ---- NUL deep inside otherwise valid requests ------------------------------------------


def nested_cases() -> list[Any]:
    retry = pb.ServiceJobRetryStrategy(
        attempts=2,
        evaluate_on_exit=[
            pb.ServiceJobEvaluateOnExit(action=pb.RETRY_ACTION_RETRY, on_exit_code="1"),
            pb.ServiceJobEvaluateOnExit(action=pb.RETRY_ACTION_EXIT, on_exit_code=NUL),
        ],
    )
    limit = pb.CapacityLimit(capacity_unit=UNIT + "\x00", max_capacity=1)
    return [
        ("jobs.SubmitServiceJob", job(tags={"team": NUL}), 'tags["team"]'),
        ("jobs.SubmitServiceJob", job(tags={"te\x00am": "x"}), 'tags["te\\u0000am"]'),
        ("jobs.SubmitServiceJob", job(client_token=NUL), "client_token"),
        (
            "jobs.SubmitServiceJob",
            job(retry_strategy=retry),
            "retry_strategy.evaluate_on_exit[1].on_exit_code",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=payload(Environment={"A": NUL})),
            "service_request_payload.Environment.A",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=payload(HyperParameters={NUL: "1"})),
            'service_request_payload.HyperParameters["a\\u0000b"]',
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=payload(Tags=[{"Key": "k", "Value": "\ud800"}])),
            "service_request_payload.Tags[0].Value",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=PAYLOAD[:-1] + ', "X": "' + NUL + '"}'),
            "service_request_payload",
        ),
        (
            "jobs.SubmitServiceJobs",
            pb.SubmitServiceJobsRequest(jobs=[job(name="fine"), job(name="bad", tags={"k": NUL})]),
            'jobs[1].tags["k"]',
        ),
        (
            "quota.CreateQuotaShare",
            pb.CreateQuotaShareRequest(
                job_queue="q",
                quota_share_name="QS3",
                capacity_limits=[limit],
                resource_sharing_configuration=pb.ResourceSharingConfiguration(
                    strategy=pb.SHARING_STRATEGY_LEND
                ),
            ),
            "capacity_limits[0].capacity_unit",
        ),
        (
            "quota.UpdateQuotaShare",
            pb.UpdateQuotaShareRequest(job_queue="q", quota_share_name="QS1\x00"),
            "quota_share_name",
        ),
        (
            "quota.CreateJobQueue",
            pb.CreateJobQueueRequest(
                job_queue_name="q2",
                scheduling_policy_arn="fifo",
                service_environment_order=[
                    pb.ServiceEnvironmentOrder(order=1, service_environment="env\x00")
                ],
            ),
            "service_environment_order[0].service_environment",
        ),
        (
            "quota.DescribeJobQueues",
            pb.DescribeJobQueuesRequest(job_queues=["q", "arn:aws:batch:x:1:job-queue/q\x00"]),
            "job_queues[1]",
        ),
        (
            "jobs.ListServiceJobs",
            pb.ListServiceJobsRequest(
                job_queue="q",
                filters=[
                    pb.KeyValuesPair(name="AFTER_CREATED_AT", values=["0"]),
                    pb.KeyValuesPair(name="JOB_NAME", values=["tr*" + NUL]),
                ],
            ),
            "filters[1].values[0]",
        ),
        ("nodes.DrainNode", pb.DrainNodeRequest(host_id=NUL), "host_id"),
    ]


@pytest.mark.parametrize(("rpc", "request_", "field"), nested_cases(), ids=case_ids(nested_cases()))
async def test_a_nul_deep_in_a_valid_request_is_refused_and_nothing_is_written(
    admission: Client, db: Any, rpc: str, request_: Message, field: str
) -> None:
    c = admission
    await set_up_queue(c)
    await submit(c, job(client_token="first"))
    untouched = Untouched(c, db)
    before = await untouched.now()
    stubs, name = rpc.split(".")
    code, named = await rejected(c.call(getattr(getattr(c, stubs), name), request_))
    assert (code, named) == (INVALID, field)
    assert await untouched.now() == before
    # The projection is not stalled: a valid request after the refusal is read back.
    job_id = await submit(c, job(name="after", tags={"team": "ok"}))
    assert (await describe(c, job_id)).tags["team"] == "ok"


async def test_a_job_id_with_a_nul_is_refused_by_every_job_rpc(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)
    before = await c.log.last_seq()
    bad = job_id + "\x00"
    for call, field in (
        (c.jobs.UpdateServiceJob(pb.UpdateServiceJobRequest(job_id=bad)), "job_id"),
        (c.jobs.TerminateServiceJob(pb.TerminateServiceJobRequest(job_id=bad)), "job_id"),
        (
            c.jobs.TerminateServiceJob(pb.TerminateServiceJobRequest(job_id=job_id, reason=NUL)),
            "reason",
        ),
        (c.pools.UpdateWarmPool(pb.UpdateWarmPoolRequest(job_id=bad)), "job_id"),
        (c.jobs.DescribeServiceJob(pb.DescribeServiceJobRequest(job_id=bad)), "job_id"),
    ):
        assert await rejected(call) == (INVALID, field)
    assert await c.log.last_seq() == before
    assert (await describe(c, job_id)).status == pb.JOB_STATUS_RUNNABLE


# ---- numbers out of range ---------------------------------------------------------------


def number_cases() -> list[Any]:
    def keep_alive(seconds: int) -> Callable[[str], Message]:
        return lambda j: pb.UpdateWarmPoolRequest(job_id=j, keep_alive_period_in_seconds=seconds)

    payload_field = "service_request_payload"
    rc = f"{payload_field}.ResourceConfig"
    big = "1" + "0" * 400
    return [
        # JSON numbers in the payload: no int64 or double holds them.
        (
            "jobs.SubmitServiceJob",
            job(
                service_request_payload=PAYLOAD.replace(
                    '"InstanceCount": 1', f'"InstanceCount": {big}'
                )
            ),
            f"{rc}.InstanceCount",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=PAYLOAD[:-1] + ', "HyperParameters": {"lr": 1e400}}'),
            f"{payload_field}.HyperParameters.lr",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=PAYLOAD[:-1] + ', "X": [1, NaN]}'),
            f"{payload_field}.X[1]",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=PAYLOAD[:-1] + f', "X": [{{"y": -{big}}}]}}'),
            f"{payload_field}.X[0].y",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=resources(InstanceCount=2**31)),
            f"{rc}.InstanceCount",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=resources(VolumeSizeInGB=2**40)),
            f"{rc}.VolumeSizeInGB",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=resources(KeepAlivePeriodInSeconds=3601)),
            f"{rc}.KeepAlivePeriodInSeconds",
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=payload(StoppingCondition={"MaxRuntimeInSeconds": 2**63})),
            f"{payload_field}.StoppingCondition.MaxRuntimeInSeconds",
        ),
        (
            "jobs.SubmitServiceJob",
            job(
                service_request_payload=PAYLOAD[:-1]
                + ', "X": '
                + "[" * 100_000
                + "]" * 100_000
                + "}"
            ),
            payload_field,
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=PAYLOAD[:-1] + ', "X": ' + "[" * 40 + "]" * 40 + "}"),
            f"{payload_field}.X" + "[0]" * 32,
        ),
        (
            "jobs.SubmitServiceJob",
            job(service_request_payload=PAYLOAD[:-1] + ', "X": ' + "[" * 30 + "]" * 30 + "}"),
            None,
        ),
        # Request fields against the API's documented ranges.
        ("jobs.SubmitServiceJob", job(scheduling_priority=10_000), "scheduling_priority"),
        ("jobs.SubmitServiceJob", job(scheduling_priority=-1), "scheduling_priority"),
        (
            "jobs.SubmitServiceJob",
            job(retry_strategy=pb.ServiceJobRetryStrategy(attempts=11)),
            "retry_strategy.attempts",
        ),
        (
            "jobs.SubmitServiceJob",
            job(timeout_config=pb.ServiceJobTimeout(attempt_duration_seconds=-1)),
            "timeout_config.attempt_duration_seconds",
        ),
        (
            "jobs.SubmitServiceJob",
            job(
                preemption_configuration=pb.ServiceJobPreemptionConfiguration(
                    preemption_retries_before_termination=-1
                )
            ),
            "preemption_configuration.preemption_retries_before_termination",
        ),
        (
            "jobs.UpdateServiceJob",
            lambda j: pb.UpdateServiceJobRequest(job_id=j, scheduling_priority=2**31 - 1),
            "scheduling_priority",
        ),
        ("pools.UpdateWarmPool", keep_alive(3601), "keep_alive_period_in_seconds"),
        ("pools.UpdateWarmPool", keep_alive(-1), "keep_alive_period_in_seconds"),
        (
            "quota.CreateServiceEnvironment",
            pb.CreateServiceEnvironmentRequest(
                service_environment_name="e2",
                capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=-3)],
            ),
            "capacity_limits[0].max_capacity",
        ),
        (
            "quota.UpdateQuotaShare",
            pb.UpdateQuotaShareRequest(
                job_queue="q",
                quota_share_name="QS1",
                resource_sharing_configuration=pb.ResourceSharingConfiguration(
                    strategy=pb.SHARING_STRATEGY_LEND_AND_BORROW, borrow_limit=-2
                ),
            ),
            "resource_sharing_configuration.borrow_limit",
        ),
        (
            "quota.CreateJobQueue",
            pb.CreateJobQueueRequest(
                job_queue_name="q2",
                scheduling_policy_arn="fifo",
                service_environment_order=[
                    pb.ServiceEnvironmentOrder(order=-1, service_environment="env")
                ],
            ),
            "service_environment_order[0].order",
        ),
        (
            "jobs.ListServiceJobs",
            pb.ListServiceJobsRequest(job_queue="q", max_results=-1),
            "max_results",
        ),
        (
            "quota.ListQuotaShares",
            pb.ListQuotaSharesRequest(job_queue="q", max_results=-5),
            "max_results",
        ),
        ("quota.DescribeJobQueues", pb.DescribeJobQueuesRequest(max_results=-1), "max_results"),
        (
            "quota.GetJobQueueSnapshot",
            pb.GetJobQueueSnapshotRequest(job_queue="q", max_results=-1),
            "max_results",
        ),
        ("pools.ListWarmPools", pb.ListWarmPoolsRequest(max_results=-1), "max_results"),
        ("nodes.ListNodes", pb.ListNodesRequest(max_results=-1), "max_results"),
        # Epoch-ms filters are int64 text.
        *[
            (
                "jobs.ListServiceJobs",
                pb.ListServiceJobsRequest(
                    job_queue="q",
                    filters=[pb.KeyValuesPair(name="BEFORE_CREATED_AT", values=[value])],
                ),
                "filters[0].values",
            )
            for value in (big, "9" * 5000, str(2**63), "²", "-1", "1e3")
        ],
    ]


@pytest.mark.parametrize(("rpc", "request_", "field"), number_cases(), ids=case_ids(number_cases()))
async def test_a_number_out_of_range_is_refused_naming_the_field(
    admission: Client, db: Any, rpc: str, request_: Any, field: str | None
) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)
    untouched = Untouched(c, db)
    before = await untouched.now()
    request = request_(job_id) if callable(request_) else request_
    stubs, name = rpc.split(".")
    method = getattr(getattr(c, stubs), name)
    if field is None:  # the bound's other side: still accepted
        await c.call(method, request)
        return
    assert await rejected(c.call(method, request)) == (INVALID, field)
    assert await untouched.now() == before


async def test_a_min_seq_header_no_log_can_reach_is_refused(admission: Client) -> None:
    c = admission
    for value in ("9" * 5000, str(2**63), "0x10"):
        call = c.jobs.DescribeServiceJob(
            pb.DescribeServiceJobRequest(job_id="j"), metadata=((MIN_SEQ_KEY, value),)
        )
        assert await rejected(call) == (INVALID, MIN_SEQ_KEY)


# ---- page tokens ------------------------------------------------------------------------


async def all_pages(c: Client, queue: str = "q", size: int = 2) -> tuple[list[str], list[str]]:
    """Job ids of every page of ListServiceJobs, and the tokens that led there."""
    ids, tokens, token = [], [], ""
    while True:
        reply = await c.call(
            c.jobs.ListServiceJobs,
            pb.ListServiceJobsRequest(
                job_queue=queue, max_results=size, next_token=token, all_statuses=True
            ),
        )
        ids.extend(j.job_id for j in reply.job_summary_list)
        token = reply.next_token
        if not token:
            return ids, tokens
        tokens.append(token)


def edited(token: str, at: int) -> str:
    flipped = "A" if token[at] != "A" else "B"
    return token[:at] + flipped + token[at + 1 :]


async def test_a_valid_token_pages_through_every_job_once(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    submitted = [await submit(c, job(name=f"j{i}")) for i in range(5)]
    ids, tokens = await all_pages(c)
    assert ids == submitted[::-1]  # newest first, as AWS
    assert len(tokens) == 2
    # Lists admission cuts itself (offset tokens) are sealed the same way.
    for name in ("env2", "env3"):
        await c.call(
            c.quota.CreateServiceEnvironment,
            pb.CreateServiceEnvironmentRequest(
                service_environment_name=name,
                capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=1)],
            ),
        )
    names, token = [], ""
    while True:
        reply = await c.call(
            c.quota.DescribeServiceEnvironments,
            pb.DescribeServiceEnvironmentsRequest(max_results=1, next_token=token),
        )
        names.extend(e.service_environment_name for e in reply.service_environments)
        token = reply.next_token
        if not token:
            break
        assert "." in token  # sealed
    assert names == ["env", "env2", "env3"]


async def test_a_forged_edited_or_truncated_token_is_refused(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    # Newest first: the first page holds the last job submitted.
    await submit(c, job(name="c"))
    second, first = await submit(c, job(name="b")), await submit(c, job(name="a"))
    _, (token, *_) = await all_pages(c, size=1)
    inner, _, mac = token.rpartition(".")
    # The same key, moved to another job: the old server took this and skipped ahead.
    created, job_id = msgspec.json.decode(
        base64.urlsafe_b64decode(inner + "=" * (-len(inner) % 4))
    )[1:]
    assert job_id == first
    moved = inner_token("jobs", created, second)
    shares = await c.call(
        c.quota.ListQuotaShares, pb.ListQuotaSharesRequest(job_queue="q", max_results=1)
    )
    forged = [
        inner,  # unsealed, as the read model spells it
        inner_token("jobs", 1.0, NUL),
        raw_token('["jobs",1' + "0" * 400 + ',"a"]') + "." + mac,
        f"{moved}.{mac}",
        edited(token, 3),
        edited(token, len(token) - 2),
        token[:-1],
        token[: len(token) // 2],
        token + "A",
        "." + mac,
        token + "\x00",
        "é" + token,
        token * 50,
        shares.next_token,  # sealed, but for another RPC
    ]
    before = await c.log.last_seq()
    for bad in forged:
        call = c.jobs.ListServiceJobs(
            pb.ListServiceJobsRequest(
                job_queue="q", max_results=1, next_token=bad, all_statuses=True
            )
        )
        assert await rejected(call) == (INVALID, "next_token"), bad
    assert await c.log.last_seq() == before
    # The genuine token still works.
    reply = await c.call(
        c.jobs.ListServiceJobs,
        pb.ListServiceJobsRequest(
            job_queue="q", max_results=1, next_token=token, all_statuses=True
        ),
    )
    assert [j.job_id for j in reply.job_summary_list] == [second]


async def test_replicas_with_one_secret_accept_each_others_tokens(start_admission: Starter) -> None:
    a = await start_admission(page_token_secret="shared-secret")
    b = await start_admission(projector=False, page_token_secret="shared-secret")
    other = await start_admission(projector=False, page_token_secret="another-secret")
    await set_up_queue(a)
    submitted = [await submit(a, job(name=f"j{i}")) for i in range(3)]
    first = await a.call(
        a.jobs.ListServiceJobs,
        pb.ListServiceJobsRequest(job_queue="q", max_results=2, all_statuses=True),
    )
    request = pb.ListServiceJobsRequest(
        job_queue="q", max_results=2, next_token=first.next_token, all_statuses=True
    )
    rest = await b.call(b.jobs.ListServiceJobs, request, min_seq=a.seq)
    assert [j.job_id for j in [*first.job_summary_list, *rest.job_summary_list]] == submitted[::-1]
    assert await rejected(other.call(other.jobs.ListServiceJobs, request, min_seq=a.seq)) == (
        INVALID,
        "next_token",
    )


async def test_without_a_secret_tokens_work_only_on_the_replica_that_made_them(
    start_admission: Starter, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="qm_admission.paging"):
        a = await start_admission()
    assert any("only work against this replica" in r.getMessage() for r in caplog.records)
    b = await start_admission(projector=False)
    await set_up_queue(a)
    for i in range(3):
        await submit(a, job(name=f"j{i}"))
    first = await a.call(
        a.jobs.ListServiceJobs,
        pb.ListServiceJobsRequest(job_queue="q", max_results=2, all_statuses=True),
    )
    request = pb.ListServiceJobsRequest(
        job_queue="q", max_results=2, next_token=first.next_token, all_statuses=True
    )
    assert len((await a.call(a.jobs.ListServiceJobs, request)).job_summary_list) == 1
    assert await rejected(b.call(b.jobs.ListServiceJobs, request, min_seq=a.seq)) == (
        INVALID,
        "next_token",
    )


async def test_the_read_model_refuses_a_token_no_query_can_take(pg_dsn: str) -> None:
    """Behind the seal, the read model's own check: a bad key is a token error, not a query."""
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=2)
    read = ReadModel(pool, SCHEMA)
    try:
        await Projector(pool, SCHEMA).prepare()
        for token in (
            inner_token("jobs", 1.0, NUL),
            raw_token('["jobs",1' + "0" * 400 + ',"a"]'),
            raw_token('["jobs",1e400,"a"]'),
            inner_token("jobs", True, "a"),
            inner_token("jobs", "1.0", "a"),
            raw_token('["jobs",1.0,"\\ud800"]'),
        ):
            with pytest.raises(InvalidNextTokenError):
                await read.list_jobs("q", next_token=token)
        with pytest.raises(InvalidNextTokenError):
            await read.list_pools(next_token=inner_token("pools", NUL))
        with pytest.raises(InvalidNextTokenError):
            await read.list_shares("q", next_token=inner_token("shares", 7))
        assert await read.list_jobs("q", next_token=inner_token("jobs", 1.0, "a")) == ([], None)
    finally:
        await read.close()
        await pool.close()
