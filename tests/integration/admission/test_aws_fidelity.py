"""AWS Batch fidelity through gRPC against real nats-server and Postgres (issue 9).

Deletes with AWS's preconditions, scheduling policies, tags, ListServiceJobs'
filters and defaults, ARNs in place of ids, and the fields AWS shows (status,
types, priority, latest attempt, usage after the end, the snapshot's totals).
Decisions and reports a scheduler and node agent would write are appended to the
log directly: admission is the part under test.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import grpc
import pytest

from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.eventlog import encode_batch, subjects
from quartermaster.store import arns

from .conftest import Client
from .test_admission_server import UNIT, describe, field_of, job, rejection, set_up_queue, submit

INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


async def refused(c: Client, method: Any, request: Any) -> tuple[grpc.StatusCode, str | None]:
    before = await c.log.last_seq()
    error = await rejection(c.call(method, request))
    assert await c.log.last_seq() == before  # nothing written
    return error.code(), field_of(error)


async def run_job(c: Client, job_id: str, *, finish: bool, model: str = "") -> int:
    """Register h1, dispatch `job_id` on it, report it RUNNING (and SUCCEEDED, with the
    `model` it uploaded); the last seq."""
    now = time.time()
    prefix = c.log.prefix
    await c.log.append(
        subjects.reports("h1", prefix),
        encode_batch([ev.HostRegistered(at=now, host_id="h1", instance_type=UNIT, gpu_count=1)]),
        msg_id=f"reg-{job_id}",
    )
    await c.log.append(
        subjects.decisions("q", prefix),
        encode_batch([ev.JobDispatched(at=now, job_id=job_id, attempt=1, hosts=("h1",))]),
        msg_id=f"dispatch-{job_id}",
    )
    reports: list[ev.Event] = [ev.JobRunning(at=now + 1, job_id=job_id, attempt=1, host="h1")]
    if finish:
        reports.append(
            ev.JobSucceeded(at=now + 2, job_id=job_id, attempt=1, host="h1", model_artifacts=model)
        )
    return await c.log.append(
        subjects.reports("h1", prefix), encode_batch(reports), msg_id=f"report-{job_id}"
    )


async def disable_share(c: Client, name: str) -> None:
    await c.call(
        c.quota.UpdateQuotaShare,
        pb.UpdateQuotaShareRequest(
            job_queue="q", quota_share_name=name, state=pb.QUOTA_SHARE_STATE_DISABLED
        ),
    )


async def list_jobs(c: Client, min_seq: int | None = None, **fields: Any) -> list[str]:
    reply = await c.call(
        c.jobs.ListServiceJobs, pb.ListServiceJobsRequest(job_queue="q", **fields), min_seq=min_seq
    )
    return [j.job_name for j in reply.job_summary_list]


# ---- ListServiceJobs ----------------------------------------------------------------------


async def test_list_jobs_defaults_to_running_newest_first_and_filters_as_aws(
    admission: Client,
) -> None:
    c = admission
    await set_up_queue(c)
    first = await submit(c, job("Train-A"))
    await submit(c, job("train-b"))
    await submit(c, job("eval", "QS2"))
    seq = await run_job(c, first, finish=False)

    def one(name: str, value: str) -> dict[str, Any]:
        return {"filters": [pb.KeyValuesPair(name=name, values=[value])]}

    assert await list_jobs(c, min_seq=seq) == ["Train-A"]  # no status, no filter: RUNNING
    assert await list_jobs(c, all_statuses=True) == ["eval", "train-b", "Train-A"]
    assert await list_jobs(c, job_status=pb.JOB_STATUS_RUNNABLE) == ["eval", "train-b"]
    # A filter lists every status; JOB_NAME is case-insensitive with a trailing * prefix.
    assert await list_jobs(c, **one("JOB_NAME", "TRAIN*")) == ["train-b", "Train-A"]
    assert await list_jobs(c, **one("JOB_NAME", "train-a")) == ["Train-A"]
    assert await list_jobs(c, **one("JOB_NAME", "train")) == []
    assert await list_jobs(c, **one("QUOTA_SHARE_NAME", "QS2")) == ["eval"]
    assert await list_jobs(c, **one("SHARE_IDENTIFIER", "QS1")) == ["train-b", "Train-A"]
    pages = await c.call(
        c.jobs.ListServiceJobs,
        pb.ListServiceJobsRequest(job_queue="q", all_statuses=True, max_results=2),
    )
    assert len(pages.job_summary_list) == 2 and pages.next_token


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_results": 101}, "max_results"),
        ({"max_results": -1}, "max_results"),
        (
            {
                "filters": [
                    pb.KeyValuesPair(name="JOB_NAME", values=["a"]),
                    pb.KeyValuesPair(name="QUOTA_SHARE_NAME", values=["QS1"]),
                ]
            },
            "filters",
        ),
        ({"filters": [pb.KeyValuesPair(name="JOB_NAME", values=["a*b"])]}, "filters[0].values"),
        ({"filters": [pb.KeyValuesPair(name="STATUS", values=["x"])]}, "filters[0].name"),
        (
            {"filters": [pb.KeyValuesPair(name="QUOTA_SHARE_NAME", values=["nope"])]},
            "filters[0].values",
        ),
        (
            {
                "quota_share_name": "QS2",
                "filters": [pb.KeyValuesPair(name="QUOTA_SHARE_NAME", values=["QS1"])],
            },
            "quota_share_name",
        ),
    ],
)
async def test_bad_list_jobs_requests_name_their_field(
    admission: Client, fields: dict[str, Any], field: str
) -> None:
    c = admission
    await set_up_queue(c)
    request = pb.ListServiceJobsRequest(job_queue="q", **fields)

    code, named = await refused(c, c.jobs.ListServiceJobs, request)

    assert code in (INVALID, NOT_FOUND)
    assert named == field


# ---- ARNs for ids ---------------------------------------------------------------------------


async def test_a_job_arn_works_wherever_a_job_id_does(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)
    job_arn = arns.job(job_id)

    await c.call(
        c.jobs.UpdateServiceJob,
        pb.UpdateServiceJobRequest(job_id=job_arn, scheduling_priority=7),
    )
    detail = await describe(c, job_arn)
    await c.call(
        c.jobs.TerminateServiceJob, pb.TerminateServiceJobRequest(job_id=job_arn, reason="done")
    )

    assert (detail.job_id, detail.scheduling_priority) == (job_id, 7)
    assert (await describe(c, job_id)).status == pb.JOB_STATUS_FAILED
    code, field = await refused(
        c, c.jobs.DescribeServiceJob, pb.DescribeServiceJobRequest(job_id="arn:qm:x:y:z:queue/q")
    )
    assert (code, field) == (INVALID, "job_id")


async def test_quota_share_requests_take_the_share_arn(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    share_arn = arns.quota_share("q", "QS2")

    updated = await c.call(
        c.quota.UpdateQuotaShare,
        pb.UpdateQuotaShareRequest(quota_share_arn=share_arn, state=pb.QUOTA_SHARE_STATE_DISABLED),
    )
    described = await c.call(
        c.quota.DescribeQuotaShare, pb.DescribeQuotaShareRequest(quota_share_arn=share_arn)
    )
    await c.call(c.quota.DeleteQuotaShare, pb.DeleteQuotaShareRequest(quota_share_arn=share_arn))

    assert updated.quota_share_arn == share_arn
    assert described.quota_share.state == pb.QUOTA_SHARE_STATE_DISABLED
    shares = await c.call(c.quota.ListQuotaShares, pb.ListQuotaSharesRequest(job_queue="q"))
    assert [s.quota_share_name for s in shares.quota_shares] == ["QS1"]
    for bad, field in (
        (arns.job_queue("q"), "quota_share_arn"),
        (arns.quota_share("q", "nope"), "quota_share_name"),
    ):
        code, named = await refused(
            c, c.quota.DescribeQuotaShare, pb.DescribeQuotaShareRequest(quota_share_arn=bad)
        )
        assert (code, named) in ((INVALID, field), (NOT_FOUND, field))
    mismatch = pb.DescribeQuotaShareRequest(job_queue="other", quota_share_arn=share_arn)
    assert await refused(c, c.quota.DescribeQuotaShare, mismatch) == (INVALID, "job_queue")


# ---- deletes --------------------------------------------------------------------------------


async def test_deleting_a_share_needs_it_disabled_and_terminates_its_jobs(
    admission: Client,
) -> None:
    c = admission
    await set_up_queue(c)
    waiting = await submit(c, job("waiting", "QS2"))
    running = await submit(c, job("running", "QS2"))
    seq = await run_job(c, running, finish=False)
    delete = pb.DeleteQuotaShareRequest(job_queue="q", quota_share_name="QS2")

    assert await refused(c, c.quota.DeleteQuotaShare, delete) == (PRECONDITION, "quota_share_name")
    await disable_share(c, "QS2")
    before = await c.log.last_seq()
    await c.call(c.quota.DeleteQuotaShare, delete, min_seq=seq)

    written = [e async for e in read_events(c, before + 1)]
    assert [type(e) for e in written] == [
        ev.JobTerminationRequested,
        ev.JobTerminationRequested,
        ev.QuotaShareDeleted,
    ]
    for job_id in (waiting, running):
        detail = await describe(c, job_id)
        assert (detail.status, detail.is_terminated) == (pb.JOB_STATUS_FAILED, True)
        assert detail.status_reason == "Quota share QS2 deleted"


async def read_events(c: Client, from_seq: int) -> Any:
    from quartermaster.eventlog import decode_batch

    last = await c.log.last_seq()
    async for entry in c.log.read(from_seq, last):
        for event in decode_batch(entry.data):
            yield event
        if entry.seq >= last:
            break


async def test_a_queue_and_an_environment_are_deleted_once_disabled_and_unused(
    admission: Client,
) -> None:
    c = admission
    await set_up_queue(c)
    delete_queue = pb.DeleteJobQueueRequest(job_queue="q")
    delete_env = pb.DeleteServiceEnvironmentRequest(service_environment="env")
    delete_policy = pb.DeleteSchedulingPolicyRequest(arn="fifo")

    assert await refused(c, c.quota.DeleteJobQueue, delete_queue) == (PRECONDITION, "job_queue")
    await c.call(
        c.quota.UpdateJobQueue,
        pb.UpdateJobQueueRequest(job_queue="q", state=pb.QUEUE_STATE_DISABLED),
    )
    # Still holds quota shares.
    assert await refused(c, c.quota.DeleteJobQueue, delete_queue) == (PRECONDITION, "job_queue")
    for share in ("QS1", "QS2"):
        await disable_share(c, share)
        await c.call(
            c.quota.DeleteQuotaShare,
            pb.DeleteQuotaShareRequest(job_queue="q", quota_share_name=share),
        )
    assert await refused(c, c.quota.DeleteServiceEnvironment, delete_env) == (
        PRECONDITION,
        "service_environment",
    )
    assert await refused(c, c.quota.DeleteSchedulingPolicy, delete_policy) == (PRECONDITION, "arn")
    await c.call(c.quota.DeleteJobQueue, delete_queue)
    await c.call(c.quota.DeleteSchedulingPolicy, delete_policy)
    assert await refused(c, c.quota.DeleteServiceEnvironment, delete_env) == (
        PRECONDITION,
        "service_environment",
    )  # still ENABLED
    await c.call(
        c.quota.UpdateServiceEnvironment,
        pb.UpdateServiceEnvironmentRequest(
            service_environment="env", state=pb.SERVICE_ENVIRONMENT_STATE_DISABLED
        ),
    )
    await c.call(c.quota.DeleteServiceEnvironment, delete_env)

    queues = await c.call(c.quota.DescribeJobQueues, pb.DescribeJobQueuesRequest())
    envs = await c.call(
        c.quota.DescribeServiceEnvironments, pb.DescribeServiceEnvironmentsRequest()
    )
    policies = await c.call(c.quota.ListSchedulingPolicies, pb.ListSchedulingPoliciesRequest())
    assert (list(queues.job_queues), list(envs.service_environments)) == ([], [])
    assert list(policies.scheduling_policies) == []
    assert await refused(c, c.quota.DeleteJobQueue, delete_queue) == (NOT_FOUND, "job_queue")


# ---- scheduling policies and tags -----------------------------------------------------------


async def test_scheduling_policies_describe_list_and_update(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    await c.call(
        c.quota.CreateSchedulingPolicy,
        pb.CreateSchedulingPolicyRequest(name="other", tags={"team": "a"}),
    )

    await c.call(
        c.quota.UpdateSchedulingPolicy,
        pb.UpdateSchedulingPolicyRequest(
            arn=arns.scheduling_policy("other"),
            quota_share_policy=pb.QuotaSharePolicy(
                idle_resource_assignment_strategy=pb.IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIFO
            ),
        ),
    )
    listed = await c.call(c.quota.ListSchedulingPolicies, pb.ListSchedulingPoliciesRequest())
    described = await c.call(
        c.quota.DescribeSchedulingPolicies,
        pb.DescribeSchedulingPoliciesRequest(arns=[arns.scheduling_policy("other"), "nope"]),
    )

    assert [p.arn for p in listed.scheduling_policies] == [
        arns.scheduling_policy("fifo"),
        arns.scheduling_policy("other"),
    ]
    (policy,) = described.scheduling_policies
    assert (policy.name, dict(policy.tags)) == ("other", {"team": "a"})
    assert policy.quota_share_policy.idle_resource_assignment_strategy == (
        pb.IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIFO
    )
    empty = pb.DescribeSchedulingPoliciesRequest()
    assert await refused(c, c.quota.DescribeSchedulingPolicies, empty) == (INVALID, "arns")
    unknown = pb.UpdateSchedulingPolicyRequest(arn="nope")
    assert await refused(c, c.quota.UpdateSchedulingPolicy, unknown) == (NOT_FOUND, "arn")
    too_many = pb.ListSchedulingPoliciesRequest(max_results=101)
    assert await refused(c, c.quota.ListSchedulingPolicies, too_many) == (INVALID, "max_results")


async def test_every_resource_takes_tags(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c, job(tags={"a": "1"}))
    resources = [
        arns.service_environment("env"),
        arns.scheduling_policy("fifo"),
        arns.job_queue("q"),
        arns.quota_share("q", "QS1"),
        arns.job(job_id),
    ]

    for arn in resources:
        await c.call(c.quota.TagResource, pb.TagResourceRequest(resource_arn=arn, tags={"b": "2"}))
        await c.call(c.quota.TagResource, pb.TagResourceRequest(resource_arn=arn, tags={"c": "3"}))
        await c.call(
            c.quota.UntagResource, pb.UntagResourceRequest(resource_arn=arn, tag_keys=["c"])
        )

    for arn in resources:
        listed = await c.call(
            c.quota.ListTagsForResource, pb.ListTagsForResourceRequest(resource_arn=arn)
        )
        expected = {"a": "1", "b": "2"} if arn.endswith(job_id) else {"b": "2"}
        assert dict(listed.tags) == expected, arn
    env = (
        await c.call(c.quota.DescribeServiceEnvironments, pb.DescribeServiceEnvironmentsRequest())
    ).service_environments[0]
    queue = (await c.call(c.quota.DescribeJobQueues, pb.DescribeJobQueuesRequest())).job_queues[0]
    share = (
        await c.call(
            c.quota.DescribeQuotaShare,
            pb.DescribeQuotaShareRequest(job_queue="q", quota_share_name="QS1"),
        )
    ).quota_share
    assert dict(env.tags) == dict(queue.tags) == dict(share.tags) == {"b": "2"}
    assert dict((await describe(c, job_id)).tags) == {"a": "1", "b": "2"}


@pytest.mark.parametrize(
    ("request_", "code", "field"),
    [
        (pb.TagResourceRequest(resource_arn="", tags={"a": "1"}), INVALID, "resource_arn"),
        (pb.TagResourceRequest(resource_arn="q", tags={"a": "1"}), INVALID, "resource_arn"),
        (
            pb.TagResourceRequest(resource_arn=arns.job_queue("nope"), tags={"a": "1"}),
            NOT_FOUND,
            "resource_arn",
        ),
        (pb.TagResourceRequest(resource_arn=arns.job_queue("q")), INVALID, "tags"),
        (
            pb.TagResourceRequest(resource_arn=arns.job_queue("q"), tags={"aws:x": "1"}),
            INVALID,
            "tags",
        ),
        (
            pb.TagResourceRequest(
                resource_arn=arns.job_queue("q"), tags={f"k{i}": "v" for i in range(51)}
            ),
            INVALID,
            "tags",
        ),
        (
            pb.TagResourceRequest(resource_arn=arns.job_queue("q"), tags={"k": "v" * 257}),
            INVALID,
            "tags",
        ),
        (pb.UntagResourceRequest(resource_arn=arns.job_queue("q")), INVALID, "tag_keys"),
    ],
)
async def test_bad_tag_requests_name_their_field(
    admission: Client, request_: Any, code: grpc.StatusCode, field: str
) -> None:
    c = admission
    await set_up_queue(c)
    method = (
        c.quota.TagResource
        if isinstance(request_, pb.TagResourceRequest)
        else c.quota.UntagResource
    )

    assert await refused(c, method, request_) == (code, field)


# ---- fields AWS shows -----------------------------------------------------------------------


async def test_resources_show_status_type_and_priority(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    await c.call(c.quota.UpdateJobQueue, pb.UpdateJobQueueRequest(job_queue="q", priority=10))

    queue = (await c.call(c.quota.DescribeJobQueues, pb.DescribeJobQueuesRequest())).job_queues[0]
    env = (
        await c.call(c.quota.DescribeServiceEnvironments, pb.DescribeServiceEnvironmentsRequest())
    ).service_environments[0]
    share = (
        await c.call(c.quota.ListQuotaShares, pb.ListQuotaSharesRequest(job_queue="q"))
    ).quota_shares[0]

    assert (queue.status, queue.job_queue_type, queue.priority) == (
        pb.RESOURCE_STATUS_VALID,
        "SAGEMAKER_TRAINING",
        10,
    )
    assert (env.status, env.service_environment_type) == (
        pb.RESOURCE_STATUS_VALID,
        "SAGEMAKER_TRAINING",
    )
    assert share.status == pb.RESOURCE_STATUS_VALID
    bad = pb.UpdateJobQueueRequest(job_queue="q", priority=1001)
    assert await refused(c, c.quota.UpdateJobQueue, bad) == (INVALID, "priority")
    bad_type = pb.CreateJobQueueRequest(
        job_queue_name="q2",
        scheduling_policy_arn="fifo",
        job_queue_type="ECS",
        service_environment_order=[pb.ServiceEnvironmentOrder(order=1, service_environment="env")],
    )
    assert await refused(c, c.quota.CreateJobQueue, bad_type) == (INVALID, "job_queue_type")


async def test_a_finished_job_keeps_its_usage_and_shows_its_latest_attempt(
    admission: Client,
) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)
    waiting = await submit(c, job("waiting"))
    training_job = f"train-{job_id[:8]}-1"  # <job name>-<id8>-<attempt>, as the host names it
    model = f"s3://models/out/{training_job}/output/model.tar.gz"
    seq = await run_job(c, job_id, finish=True, model=model)

    detail = (
        await c.call(
            c.jobs.DescribeServiceJob, pb.DescribeServiceJobRequest(job_id=job_id), min_seq=seq
        )
    ).job
    summary = [
        j
        for j in (
            await c.call(
                c.jobs.ListServiceJobs,
                pb.ListServiceJobsRequest(job_queue="q", job_status=pb.JOB_STATUS_SUCCEEDED),
            )
        ).job_summary_list
    ]
    snapshot = await c.call(
        c.quota.GetJobQueueSnapshot, pb.GetJobQueueSnapshotRequest(job_queue="q")
    )

    assert detail.status == pb.JOB_STATUS_SUCCEEDED
    assert [(u.capacity_unit, u.quantity) for u in detail.capacity_usage] == [(UNIT, 1)]
    assert list(detail.latest_attempt.host_ids) == ["h1"]
    assert detail.latest_attempt.stopped_at > 0
    assert [a.training_job_name for a in detail.attempts] == [training_job]
    assert detail.latest_attempt.training_job_arn == (
        f"arn:aws:sagemaker:us-east-1:000000000000:training-job/{training_job}"
    )
    assert detail.latest_attempt.model_artifacts == model
    assert detail.scheduled_at > 0
    assert [s.job_id for s in summary] == [job_id]
    assert summary[0].latest_attempt.host_ids == ["h1"]
    assert summary[0].latest_attempt.training_job_name == training_job
    assert list((await describe(c, waiting)).capacity_usage) == []  # holds nothing yet
    (front,) = snapshot.front_of_queue
    assert front.job_id == waiting
    assert front.earliest_time_at_position == front.created_at
    assert [(u.capacity_unit, u.quantity) for u in snapshot.total_capacity_usage] == [(UNIT, 0)]


async def test_the_snapshot_sums_what_the_queue_holds(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    job_id = await submit(c)
    seq = await run_job(c, job_id, finish=False)

    snapshot = await c.call(
        c.quota.GetJobQueueSnapshot, pb.GetJobQueueSnapshotRequest(job_queue="q"), min_seq=seq
    )

    assert [(u.capacity_unit, u.quantity) for u in snapshot.total_capacity_usage] == [(UNIT, 1)]


# ---- the CLI ---------------------------------------------------------------------------------


async def test_the_cli_deletes_lists_policies_and_tags(
    admission: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    from quartermaster.cli.main import main

    c = admission
    await set_up_queue(c)
    base = ["--address", f"127.0.0.1:{c.port}", "--insecure"]
    queue_arn = arns.job_queue("q")

    async def qm(*words: str) -> tuple[int, str]:
        code = await asyncio.to_thread(main, [*base, *words])
        return code, capsys.readouterr().out

    assert (await qm("tags", "add", queue_arn, "team=a", "cost=1"))[0] == 0
    assert (await qm("tags", "remove", queue_arn, "cost"))[0] == 0
    code, listed = await qm("tags", "list", queue_arn, "--output", "json")
    assert (code, json.loads(listed)) == (0, {"tags": {"team": "a"}})
    code, policies = await qm("policy", "list", "--output", "json")
    listed_policies = json.loads(policies)["schedulingPolicies"]
    assert (code, [p["name"] for p in listed_policies]) == (0, ["fifo"])
    assert (await qm("queue", "delete", "q"))[0] == 1  # ENABLED: one line, exit 1
    assert (await qm("env", "update", "env", "--state", "disabled"))[0] == 0
    assert (await qm("queue", "update", "q", "--state", "disabled"))[0] == 0
    for share in ("QS1", "QS2"):
        assert (await qm("share", "delete", "q", share))[0] == 1  # ENABLED
        assert (await qm("share", "disable", "q", share))[0] == 0
        assert (await qm("share", "delete", "q", share))[0] == 0
    assert (await qm("queue", "delete", "q"))[0] == 0
    assert (await qm("policy", "delete", "fifo"))[0] == 0
    assert (await qm("env", "delete", "env"))[0] == 0
    assert (
        list((await c.call(c.quota.DescribeJobQueues, pb.DescribeJobQueuesRequest())).job_queues)
        == []
    )
