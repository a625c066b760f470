"""The admission server end to end: real gRPC on a free port, real JetStream, real Postgres.

No scheduler runs here, so submitted jobs stay RUNNABLE; what changes them is what
admission itself writes (priority, termination).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from qm_admission.interceptors import FIELD_KEY
from qm_admission.server import SERVICE_NAMES
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import decode_batch, encode_batch, subjects

from .conftest import Client, Starter

UNIT = "ml.g5.xlarge"
PAYLOAD = json.dumps({"ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1}})


# ---- helpers --------------------------------------------------------------------------


async def set_up_queue(c: Client) -> None:
    """env (4 x ml.g5.xlarge) -> queue q (policy fifo) with shares QS1 (L&B) and QS2 (RESERVE)."""
    await c.call(
        c.quota.CreateServiceEnvironment,
        pb.CreateServiceEnvironmentRequest(
            service_environment_name="env",
            capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=4)],
        ),
    )
    await c.call(c.quota.CreateSchedulingPolicy, pb.CreateSchedulingPolicyRequest(name="fifo"))
    await c.call(
        c.quota.CreateJobQueue,
        pb.CreateJobQueueRequest(
            job_queue_name="q",
            scheduling_policy_arn="fifo",
            service_environment_order=[
                pb.ServiceEnvironmentOrder(order=1, service_environment="env")
            ],
        ),
    )
    for name, strategy in (
        ("QS1", pb.SHARING_STRATEGY_LEND_AND_BORROW),
        ("QS2", pb.SHARING_STRATEGY_RESERVE),
    ):
        await c.call(
            c.quota.CreateQuotaShare,
            pb.CreateQuotaShareRequest(
                job_queue="q",
                quota_share_name=name,
                capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=2)],
                resource_sharing_configuration=pb.ResourceSharingConfiguration(strategy=strategy),
            ),
        )


def job(name: str = "train", share: str = "QS1", **fields: Any) -> pb.SubmitServiceJobRequest:
    base: dict[str, Any] = {
        "job_name": name,
        "job_queue": "q",
        "quota_share_name": share,
        "service_request_payload": PAYLOAD,
    }
    return pb.SubmitServiceJobRequest(**{**base, **fields})


async def submit(c: Client, request: pb.SubmitServiceJobRequest | None = None) -> str:
    response = await c.call(c.jobs.SubmitServiceJob, request or job())
    return str(response.job_id)


async def describe(c: Client, job_id: str) -> pb.ServiceJobDetail:
    reply: pb.DescribeServiceJobResponse = await c.call(
        c.jobs.DescribeServiceJob, pb.DescribeServiceJobRequest(job_id=job_id)
    )
    return reply.job


async def rejection(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value


def field_of(error: grpc.aio.AioRpcError) -> str | None:
    for key, value in error.trailing_metadata() or ():
        if key == FIELD_KEY:
            return str(value)
    return None


async def logged_events(log: JetStreamLog) -> list[ev.AnyEvent]:
    last = await log.last_seq()
    out: list[ev.AnyEvent] = []
    async with contextlib.aclosing(log.read(1, last)) as entries:
        async for entry in entries:
            out.extend(decode_batch(entry.data))
    return out


@contextlib.asynccontextmanager
async def watching(c: Client, request: pb.WatchServiceJobsRequest) -> AsyncIterator[Any]:
    stream = c.jobs.WatchServiceJobs(request, metadata=(("x-qm-min-seq", str(c.seq)),))
    try:
        yield stream
    finally:
        stream.cancel()


async def next_change(stream: Any) -> pb.JobStateChange:
    change = await asyncio.wait_for(stream.read(), 10)
    assert change is not grpc.aio.EOF
    return change  # type: ignore[no-any-return]


# ---- health and reflection ------------------------------------------------------------


async def test_health_reports_every_service_serving(admission: Client) -> None:
    health = health_pb2_grpc.HealthStub(admission.channel)

    for service in ("", *SERVICE_NAMES):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, service


async def test_reflection_lists_the_four_services(admission: Client) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(admission.channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")

    replies = [reply async for reply in stub.ServerReflectionInfo(iter([request]))]

    listed = {s.name for s in replies[0].list_services_response.service}
    assert {
        "qm.v1.QuotaManagement",
        "qm.v1.ServiceJobs",
        "qm.v1.WarmPools",
        "qm.v1.Nodes",
    } <= listed
    assert "grpc.health.v1.Health" in listed


# ---- configuration ------------------------------------------------------------------------


async def test_configuration_reads_back_what_was_created(admission: Client) -> None:
    c = admission
    await set_up_queue(c)

    envs = await c.call(
        c.quota.DescribeServiceEnvironments, pb.DescribeServiceEnvironmentsRequest()
    )
    queues = await c.call(c.quota.DescribeJobQueues, pb.DescribeJobQueuesRequest(job_queues=["q"]))
    shares = await c.call(c.quota.ListQuotaShares, pb.ListQuotaSharesRequest(job_queue="q"))
    share = await c.call(
        c.quota.DescribeQuotaShare,
        pb.DescribeQuotaShareRequest(job_queue="q", quota_share_name="QS2"),
    )

    assert [e.service_environment_name for e in envs.service_environments] == ["env"]
    assert envs.service_environments[0].capacity_limits[0].max_capacity == 4
    assert [q.job_queue_name for q in queues.job_queues] == ["q"]
    assert queues.job_queues[0].service_environment_order[0].service_environment == "env"
    assert [s.quota_share_name for s in shares.quota_shares] == ["QS1", "QS2"]
    assert share.quota_share.resource_sharing_configuration.strategy == pb.SHARING_STRATEGY_RESERVE
    assert share.quota_share.state == pb.QUOTA_SHARE_STATE_ENABLED


async def test_a_share_update_and_delete_take_effect(admission: Client) -> None:
    c = admission
    await set_up_queue(c)

    await c.call(
        c.quota.UpdateQuotaShare,
        pb.UpdateQuotaShareRequest(
            job_queue="q",
            quota_share_name="QS1",
            capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=3)],
            resource_sharing_configuration=pb.ResourceSharingConfiguration(borrow_limit=50),
        ),
    )
    await c.call(
        c.quota.UpdateQuotaShare,
        pb.UpdateQuotaShareRequest(
            job_queue="q", quota_share_name="QS2", state=pb.QUOTA_SHARE_STATE_DISABLED
        ),
    )
    await c.call(
        c.quota.DeleteQuotaShare, pb.DeleteQuotaShareRequest(job_queue="q", quota_share_name="QS2")
    )

    shares = (
        await c.call(c.quota.ListQuotaShares, pb.ListQuotaSharesRequest(job_queue="q"))
    ).quota_shares
    assert [s.quota_share_name for s in shares] == ["QS1"]
    assert shares[0].capacity_limits[0].max_capacity == 3
    assert shares[0].resource_sharing_configuration.borrow_limit == 50


# ---- jobs -------------------------------------------------------------------------------


async def test_a_submitted_job_reads_back_at_once(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    before = await c.log.last_seq()

    response = await c.call(c.jobs.SubmitServiceJob, job(scheduling_priority=5, tags={"t": "1"}))
    detail = await describe(c, response.job_id)

    assert c.seq == before + 1  # the write answered its log position
    assert response.job_arn.endswith(f"job/{response.job_id}")
    assert (detail.job_name, detail.job_queue, detail.quota_share_name) == ("train", "q", "QS1")
    assert detail.status == pb.JOB_STATUS_RUNNABLE
    assert detail.scheduling_priority == 5
    assert dict(detail.tags) == {"t": "1"}
    assert json.loads(detail.service_request_payload) == json.loads(PAYLOAD)


async def test_jobs_list_in_pages_and_by_filter(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    batch = await c.call(
        c.jobs.SubmitServiceJobs,
        pb.SubmitServiceJobsRequest(
            jobs=[job(f"train-{i}") for i in range(5)] + [job("eval", "QS2")]
        ),
    )
    ids = [r.job.job_id for r in batch.results]

    pages, token = [], ""
    while True:
        reply = await c.call(
            c.jobs.ListServiceJobs,
            pb.ListServiceJobsRequest(
                job_queue="q", max_results=2, next_token=token, all_statuses=True
            ),
        )
        pages.append([j.job_id for j in reply.job_summary_list])
        token = reply.next_token
        if not token:
            break
    by_name = await c.call(
        c.jobs.ListServiceJobs,
        pb.ListServiceJobsRequest(
            job_queue="q", filters=[pb.KeyValuesPair(name="JOB_NAME", values=["train-*"])]
        ),
    )
    by_share = await c.call(
        c.jobs.ListServiceJobs,
        pb.ListServiceJobsRequest(
            job_queue="q", quota_share_name="QS2", job_status=pb.JOB_STATUS_RUNNABLE
        ),
    )

    assert [len(p) for p in pages] == [2, 2, 2]
    assert [i for p in pages for i in p] == ids[::-1]  # newest first, as AWS
    assert len(by_name.job_summary_list) == 5
    assert [j.job_name for j in by_share.job_summary_list] == ["eval"]


async def test_a_batch_writes_its_valid_jobs_in_one_envelope(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    before = await c.log.last_seq()

    reply = await c.call(
        c.jobs.SubmitServiceJobs,
        pb.SubmitServiceJobsRequest(
            jobs=[job("a"), job("b", scheduling_priority=10_000), job("c", share="nope"), job("d")]
        ),
    )

    outcomes = [r.WhichOneof("outcome") for r in reply.results]
    assert outcomes == ["job", "error", "error", "job"]
    assert [r.index for r in reply.results] == [0, 1, 2, 3]
    assert (reply.results[1].error.code, reply.results[1].error.field) == (
        "INVALID_ARGUMENT",
        "scheduling_priority",
    )
    assert (reply.results[2].error.code, reply.results[2].error.field) == (
        "NOT_FOUND",
        "quota_share_name",
    )
    assert await c.log.last_seq() == before + 1
    submitted = [e for e in await logged_events(c.log) if isinstance(e, ev.JobSubmitted)]
    assert [e.job_name for e in submitted] == ["a", "d"]


async def test_a_priority_update_reads_back(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)

    reply = await c.call(
        c.jobs.UpdateServiceJob, pb.UpdateServiceJobRequest(job_id=job_id, scheduling_priority=42)
    )

    assert reply.job_id == job_id
    assert (await describe(c, job_id)).scheduling_priority == 42


async def test_a_terminated_job_fails_with_the_reason_and_cannot_be_terminated_again(
    admission: Client,
) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)

    await c.call(
        c.jobs.TerminateServiceJob,
        pb.TerminateServiceJobRequest(job_id=job_id, reason="not needed"),
    )
    detail = await describe(c, job_id)
    again = await rejection(
        c.call(c.jobs.TerminateServiceJob, pb.TerminateServiceJobRequest(job_id=job_id, reason="x"))
    )

    assert (detail.status, detail.status_reason, detail.is_terminated) == (
        pb.JOB_STATUS_FAILED,
        "not needed",
        True,
    )
    assert again.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert field_of(again) == "job_id"


async def test_a_client_token_answers_the_first_job_and_refuses_a_different_request(
    admission: Client,
) -> None:
    c = admission
    await set_up_queue(c)

    first = await submit(c, job(client_token="tok-1"))
    again = await submit(c, job(client_token="tok-1"))
    other = await rejection(
        c.call(c.jobs.SubmitServiceJob, job(client_token="tok-1", scheduling_priority=3))
    )

    assert again == first
    assert other.code() == grpc.StatusCode.ALREADY_EXISTS
    assert field_of(other) == "client_token"
    submitted = [e for e in await logged_events(c.log) if isinstance(e, ev.JobSubmitted)]
    assert [e.job_id for e in submitted] == [first]


async def test_the_queue_snapshot_shows_the_front_in_dispatch_order(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    low = await submit(c, job("low"))
    high = await submit(c, job("high", scheduling_priority=9))

    snapshot = await c.call(
        c.quota.GetJobQueueSnapshot, pb.GetJobQueueSnapshotRequest(job_queue="q")
    )

    assert [j.job_id for j in snapshot.front_of_queue] == [high, low]
    heads = {s.quota_share_name: list(s.head_job_ids) for s in snapshot.quota_shares}
    assert heads == {"QS1": [high, low], "QS2": []}


# ---- warm pools and nodes ---------------------------------------------------------------


async def test_a_keep_alive_update_answers_the_jobs_pool(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)

    reply = await c.call(
        c.pools.UpdateWarmPool,
        pb.UpdateWarmPoolRequest(job_id=job_id, keep_alive_period_in_seconds=600),
    )
    pools = await c.call(c.pools.ListWarmPools, pb.ListWarmPoolsRequest(job_queue="q"))

    assert (reply.warm_pool.job_id, reply.warm_pool.instance_type) == (job_id, UNIT)
    assert list(pools.warm_pool_summaries) == []  # no pool until the job ends


async def test_a_registered_host_lists_and_drains(admission: Client) -> None:
    c = admission
    registered: list[ev.Event] = [
        ev.HostRegistered(at=1.0, host_id="h1", instance_type=UNIT, gpu_count=1)
    ]
    seq = await c.log.append(
        subjects.reports("h1", c.log.prefix), encode_batch(registered), msg_id="reg-h1"
    )

    listed = await c.call(c.nodes.ListNodes, pb.ListNodesRequest(), min_seq=seq)
    drained = await c.call(c.nodes.DrainNode, pb.DrainNodeRequest(host_id="h1"))
    healthy = await c.call(c.nodes.ListNodes, pb.ListNodesRequest(state=pb.NODE_STATE_HEALTHY))

    assert [(n.host_id, n.state) for n in listed.nodes] == [("h1", pb.NODE_STATE_HEALTHY)]
    assert drained.node.state == pb.NODE_STATE_DRAINED
    assert list(healthy.nodes) == []


# ---- watching ---------------------------------------------------------------------------


async def test_a_watch_sees_the_job_then_its_termination(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)

    async with watching(c, pb.WatchServiceJobsRequest(job_ids=[job_id])) as stream:
        now = await next_change(stream)
        await c.call(
            c.jobs.TerminateServiceJob, pb.TerminateServiceJobRequest(job_id=job_id, reason="stop")
        )
        then = await next_change(stream)

    assert (now.job_id, now.status) == (job_id, pb.JOB_STATUS_RUNNABLE)
    assert (then.job_id, then.status, then.status_reason) == (job_id, pb.JOB_STATUS_FAILED, "stop")
    assert then.sequence > now.sequence
    assert (then.job_queue, then.quota_share_name) == ("q", "QS1")


async def test_a_queue_watch_sees_new_jobs_and_can_resume(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    start = await c.log.last_seq()

    async with watching(c, pb.WatchServiceJobsRequest(job_queue="q")) as stream:
        first = await submit(c, job("one"))
        second = await submit(c, job("two", share="QS2"))
        seen = [await next_change(stream), await next_change(stream)]
    async with watching(
        c, pb.WatchServiceJobsRequest(job_queue="q", quota_share_name="QS2", after_sequence=start)
    ) as resumed:
        replayed = await next_change(resumed)

    assert [(s.job_id, s.status) for s in seen] == [
        (first, pb.JOB_STATUS_RUNNABLE),
        (second, pb.JOB_STATUS_RUNNABLE),
    ]
    assert replayed.job_id == second


async def test_a_watch_of_some_statuses_streams_only_changes_to_them(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    named = await submit(c, job("named"))
    ends = pb.WatchServiceJobsRequest(job_queue="q", statuses=[pb.JOB_STATUS_FAILED])

    async with (
        watching(c, ends) as stream,
        watching(
            c, pb.WatchServiceJobsRequest(job_ids=[named], statuses=[pb.JOB_STATUS_FAILED])
        ) as primed,
    ):
        first = await submit(c, job("one"))
        second = await submit(c, job("two"))
        await c.call(
            c.jobs.TerminateServiceJob, pb.TerminateServiceJobRequest(job_id=second, reason="x")
        )
        await c.call(
            c.jobs.TerminateServiceJob, pb.TerminateServiceJobRequest(job_id=named, reason="y")
        )
        seen = [await next_change(stream), await next_change(stream)]
        named_change = await next_change(primed)  # its RUNNABLE state at the start is not sent

    assert [(s.job_id, s.status) for s in seen] == [
        (second, pb.JOB_STATUS_FAILED),
        (named, pb.JOB_STATUS_FAILED),
    ]
    assert (named_change.job_id, named_change.status) == (named, pb.JOB_STATUS_FAILED)
    assert first not in {s.job_id for s in seen}  # RUNNABLE: not streamed


@pytest.mark.parametrize("status", [pb.JOB_STATUS_UNSPECIFIED, 99])
async def test_a_watch_of_no_such_status_is_refused_naming_it(
    admission: Client, status: int
) -> None:
    c = admission
    await set_up_queue(c)
    request = pb.WatchServiceJobsRequest(statuses=[pb.JOB_STATUS_RUNNING])
    request.statuses.append(status)  # a value no client sends

    async with watching(c, request) as stream:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await asyncio.wait_for(stream.read(), 10)

    assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "statuses[1]" in (refused.value.details() or "")


# ---- rejected requests write nothing ----------------------------------------------------

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
EXISTS = grpc.StatusCode.ALREADY_EXISTS
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION

REJECTED = [
    (
        "quota",
        "CreateServiceEnvironment",
        pb.CreateServiceEnvironmentRequest(
            service_environment_name="env",
            capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=1)],
        ),
        EXISTS,
        "service_environment_name",
    ),
    (
        "quota",
        "UpdateServiceEnvironment",
        pb.UpdateServiceEnvironmentRequest(service_environment="nope"),
        NOT_FOUND,
        "service_environment",
    ),
    (
        "quota",
        "CreateSchedulingPolicy",
        pb.CreateSchedulingPolicyRequest(name="bad name"),
        INVALID,
        "name",
    ),
    (
        "quota",
        "CreateJobQueue",
        pb.CreateJobQueueRequest(
            job_queue_name="q2",
            scheduling_policy_arn="fifo",
            service_environment_order=[
                pb.ServiceEnvironmentOrder(order=1, service_environment="env")
            ],
        ),
        PRECONDITION,
        "service_environment_order[0].service_environment",
    ),
    (
        "quota",
        "UpdateJobQueue",
        pb.UpdateJobQueueRequest(job_queue="q", scheduling_policy_arn="x"),
        NOT_FOUND,
        "scheduling_policy_arn",
    ),
    (
        "quota",
        "CreateQuotaShare",
        pb.CreateQuotaShareRequest(job_queue="q", quota_share_name="QS3", capacity_limits=[]),
        INVALID,
        "capacity_limits",
    ),
    (
        "quota",
        "UpdateQuotaShare",
        pb.UpdateQuotaShareRequest(
            job_queue="q",
            quota_share_name="QS2",
            resource_sharing_configuration=(pb.ResourceSharingConfiguration(borrow_limit=10)),
        ),
        INVALID,
        "resource_sharing_configuration.borrow_limit",
    ),
    (
        "quota",
        "DeleteQuotaShare",
        pb.DeleteQuotaShareRequest(job_queue="q", quota_share_name="QS1"),
        PRECONDITION,
        "quota_share_name",
    ),
    (
        "jobs",
        "SubmitServiceJob",
        job(retry_strategy=pb.ServiceJobRetryStrategy(attempts=11)),
        INVALID,
        "retry_strategy.attempts",
    ),
    (
        "jobs",
        "SubmitServiceJob",
        job(service_request_payload='{"ResourceConfig": {}}'),
        INVALID,
        "service_request_payload.ResourceConfig.InstanceType",
    ),
    ("jobs", "SubmitServiceJobs", pb.SubmitServiceJobsRequest(), INVALID, "jobs"),
    ("jobs", "UpdateServiceJob", pb.UpdateServiceJobRequest(job_id="nope"), NOT_FOUND, "job_id"),
    (
        "jobs",
        "TerminateServiceJob",
        pb.TerminateServiceJobRequest(job_id="nope", reason="r"),
        NOT_FOUND,
        "job_id",
    ),
    ("pools", "UpdateWarmPool", pb.UpdateWarmPoolRequest(job_id="nope"), NOT_FOUND, "job_id"),
    ("nodes", "DrainNode", pb.DrainNodeRequest(host_id="nope"), NOT_FOUND, "host_id"),
    # reads
    (
        "quota",
        "DescribeQuotaShare",
        pb.DescribeQuotaShareRequest(job_queue="q", quota_share_name="nope"),
        NOT_FOUND,
        "quota_share_name",
    ),
    (
        "quota",
        "ListQuotaShares",
        pb.ListQuotaSharesRequest(job_queue="nope"),
        NOT_FOUND,
        "job_queue",
    ),
    (
        "quota",
        "GetJobQueueSnapshot",
        pb.GetJobQueueSnapshotRequest(job_queue="nope"),
        NOT_FOUND,
        "job_queue",
    ),
    (
        "quota",
        "DescribeJobQueues",
        pb.DescribeJobQueuesRequest(job_queues=["a b"]),
        INVALID,
        "job_queues[0]",
    ),
    (
        "jobs",
        "DescribeServiceJob",
        pb.DescribeServiceJobRequest(job_id="nope"),
        NOT_FOUND,
        "job_id",
    ),
    (
        "jobs",
        "ListServiceJobs",
        pb.ListServiceJobsRequest(job_queue="nope"),
        NOT_FOUND,
        "job_queue",
    ),
    (
        "jobs",
        "ListServiceJobs",
        pb.ListServiceJobsRequest(job_queue="q", next_token="garbage"),
        INVALID,
        "next_token",
    ),
    ("pools", "ListWarmPools", pb.ListWarmPoolsRequest(job_queue="nope"), NOT_FOUND, "job_queue"),
    (
        "nodes",
        "ListNodes",
        pb.ListNodesRequest(service_environment="nope"),
        NOT_FOUND,
        "service_environment",
    ),
]


@pytest.mark.parametrize(
    ("stub", "method", "request_", "code", "field"),
    [pytest.param(*case, id=f"{case[1]}-{case[4]}") for case in REJECTED],
)
async def test_a_rejected_request_gets_its_code_and_field_and_writes_nothing(
    admission: Client,
    stub: str,
    method: str,
    request_: Any,
    code: grpc.StatusCode,
    field: str,
) -> None:
    c = admission
    await set_up_queue(c)
    await submit(c)  # QS1 has an unfinished job
    before = await c.log.last_seq()

    error = await rejection(c.call(getattr(getattr(c, stub), method), request_))

    assert (error.code(), field_of(error)) == (code, field), error.details()
    assert error.details().startswith(f"{field}: ")
    assert await c.log.last_seq() == before


async def test_a_watch_of_an_unknown_job_is_not_found(admission: Client) -> None:
    async with watching(admission, pb.WatchServiceJobsRequest(job_ids=["nope"])) as stream:
        error = await rejection(stream.read())

    assert (error.code(), field_of(error)) == (NOT_FOUND, "job_ids[0]")


async def test_a_bad_min_seq_header_is_invalid(admission: Client) -> None:
    c = admission
    error = await rejection(
        c.jobs.DescribeServiceJob(
            pb.DescribeServiceJobRequest(job_id="x"), metadata=(("x-qm-min-seq", "soon"),)
        )
    )

    assert (error.code(), field_of(error)) == (INVALID, "x-qm-min-seq")


# ---- replicas ---------------------------------------------------------------------------


async def test_another_instance_reads_a_write_given_its_position(start_admission: Starter) -> None:
    writer = await start_admission()
    reader = await start_admission(projector=False)
    await set_up_queue(writer)

    job_id = await submit(writer)
    detail = (
        await reader.call(
            reader.jobs.DescribeServiceJob,
            pb.DescribeServiceJobRequest(job_id=job_id),
            min_seq=writer.seq,
        )
    ).job

    assert detail.job_id == job_id


async def test_two_instances_racing_for_one_name_create_it_once(start_admission: Starter) -> None:
    one, two = await start_admission(), await start_admission(projector=False)
    request = pb.CreateServiceEnvironmentRequest(
        service_environment_name="race",
        capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=1)],
    )

    outcomes = await asyncio.gather(
        *(c.call(c.quota.CreateServiceEnvironment, request) for c in (one, two, one, two)),
        return_exceptions=True,
    )

    failures = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(failures) == 3
    assert {f.code() for f in failures} == {EXISTS}
    created = [
        e for e in await logged_events(one.log) if isinstance(e, ev.ServiceEnvironmentCreated)
    ]
    assert len(created) == 1
