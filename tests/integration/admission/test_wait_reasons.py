"""Why a job waits, and dry runs, through gRPC (real JetStream and Postgres, no scheduler).

No scheduler runs, so what changes the jobs' reasons is what this test puts on
the log: submissions through admission, and a host registering on its report
subject (as a node agent would).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import pytest

from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.cli.main import main
from quartermaster.client import Quartermaster, TrainingQueue, training_job
from quartermaster.eventlog import encode_batch, subjects

from .conftest import Client
from .test_admission_server import UNIT, describe, field_of, job, rejection, set_up_queue, submit


def gang(name: str, count: int, share: str = "QS1") -> pb.SubmitServiceJobRequest:
    payload = json.dumps({"ResourceConfig": {"InstanceType": UNIT, "InstanceCount": count}})
    return job(name, share, service_request_payload=payload)


async def register_host(c: Client, host_id: str) -> int:
    registered = [ev.HostRegistered(at=1.0, host_id=host_id, instance_type=UNIT)]
    return await c.log.append(subjects.reports(host_id, c.log.prefix), encode_batch(registered))


async def test_a_waiting_job_says_why_in_describe_list_and_the_queue_snapshot(
    admission: Client,
) -> None:
    # given: a queue whose environment has no host yet
    c = admission
    await set_up_queue(c)
    first = await submit(c, gang("first", 2))
    second = await submit(c, job("second"))

    # when
    detail = await describe(c, first)
    behind = await describe(c, second)

    # then: the head needs hosts that are not there; the next job waits behind it
    assert detail.status == pb.JOB_STATUS_RUNNABLE
    assert detail.wait_reason.code == pb.WAIT_REASON_CODE_NOT_ENOUGH_FREE_HOSTS
    assert (detail.wait_reason.instances_needed, detail.wait_reason.units_free) == (2, 0)
    assert detail.status_reason == detail.wait_reason.message
    assert detail.status_reason.startswith("WAITING:NOT_ENOUGH_FREE_HOSTS - a gang of 2 needs 2")
    assert behind.wait_reason.code == pb.WAIT_REASON_CODE_BEHIND_IN_SHARE
    assert (behind.wait_reason.jobs_ahead, list(behind.wait_reason.job_ids)) == (1, [first])

    listed = await c.call(
        c.jobs.ListServiceJobs, pb.ListServiceJobsRequest(job_queue="q", all_statuses=True)
    )
    assert {j.job_id: j.wait_reason.code for j in listed.job_summary_list} == {
        first: pb.WAIT_REASON_CODE_NOT_ENOUGH_FREE_HOSTS,
        second: pb.WAIT_REASON_CODE_BEHIND_IN_SHARE,
    }
    snapshot = await c.call(
        c.quota.GetJobQueueSnapshot, pb.GetJobQueueSnapshotRequest(job_queue="q")
    )
    front = {j.job_id: j for j in snapshot.front_of_queue}
    assert front[first].wait_reason.code == pb.WAIT_REASON_CODE_NOT_ENOUGH_FREE_HOSTS
    assert front[second].status_reason.startswith("WAITING:BEHIND_IN_SHARE - behind 1 ")

    # when: two hosts register, for the environment whose RESERVE share QS2 (own 2) is idle
    await register_host(c, "h1")
    seq = await register_host(c, "h2")
    request = pb.DescribeServiceJobRequest(job_id=first)
    head = (await c.call(c.jobs.DescribeServiceJob, request, min_seq=seq)).job
    # then: the free hosts are QS2's idle reserve, held back from QS1's head
    assert head.wait_reason.code == pb.WAIT_REASON_CODE_RESERVE_HELD_BACK
    assert (head.wait_reason.units_free, list(head.wait_reason.quota_share_names)) == (2, ["QS2"])


async def test_a_dry_run_answers_what_the_pass_would_do_and_writes_nothing(
    admission: Client,
) -> None:
    # given: two hosts; QS1 (L&B, own 2) and QS2 (RESERVE, own 2)
    c = admission
    await set_up_queue(c)
    await register_host(c, "h1")
    seq = await register_host(c, "h2")
    last = await c.log.last_seq()

    # when: a one-instance job of QS2 is dry-run
    probe = job("probe", "QS2", dry_run=True)
    reply = await c.call(c.jobs.SubmitServiceJob, probe, min_seq=seq)

    # then: it would start cold on the lowest free host, within its own quota
    result = reply.dry_run_result
    assert (result.would_start, list(result.host_ids), result.warm_pool_job_id) == (
        True,
        ["h1"],
        "",
    )
    assert result.rule == "OWN_QUOTA"
    assert (reply.job_id, reply.job_arn, reply.job_name) == ("", "", "probe")
    assert await c.log.last_seq() == last  # nothing was written

    # when: a real two-instance job of QS2 waits for the scheduler, and another is dry-run
    await submit(c, gang("blocker", 2, "QS2"))
    last = await c.log.last_seq()
    probe = await c.call(c.jobs.SubmitServiceJob, job("probe2", "QS2", dry_run=True))

    # then: the pass would place the real one first; the probe would find QS2 at its limit
    assert probe.dry_run_result.would_start is False
    assert probe.dry_run_result.wait_reason.code == pb.WAIT_REASON_CODE_SHARE_AT_LIMIT
    assert (
        probe.dry_run_result.wait_reason.share_units,
        probe.dry_run_result.wait_reason.share_limit,
    ) == (2, 2)
    assert await c.log.last_seq() == last


async def test_a_dry_run_is_validated_like_a_submit_and_refused_in_bulk(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    last = await c.log.last_seq()

    bad = await rejection(
        c.call(c.jobs.SubmitServiceJob, job("probe", scheduling_priority=10_000, dry_run=True))
    )
    bulk = await rejection(
        c.call(
            c.jobs.SubmitServiceJobs,
            pb.SubmitServiceJobsRequest(jobs=[job("a"), job("probe", dry_run=True)]),
        )
    )

    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_of(bad) == "scheduling_priority"
    assert bulk.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_of(bulk) == "jobs[1].dry_run"
    assert await c.log.last_seq() == last


async def test_the_python_client_and_qm_dry_run_a_submission(
    admission: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    # given: one host, seen by admission
    c = admission
    await set_up_queue(c)
    seq = await register_host(c, "h1")
    await c.call(c.jobs.ListServiceJobs, pb.ListServiceJobsRequest(job_queue="q"), min_seq=seq)
    last = await c.log.last_seq()
    address = f"127.0.0.1:{c.port}"

    def submit_dry_run() -> Any:
        with Quartermaster(address, insecure=True) as client:
            payload = training_job(command=["true"], instance_type=UNIT)
            return TrainingQueue("q", client).dry_run(
                payload, job_name="probe", quota_share_name="QS2"
            )

    # when
    result = await asyncio.to_thread(submit_dry_run)
    argv = ["--address", address, "--insecure", "job", "submit", "q", "--share", "QS2"]
    code = await asyncio.to_thread(main, [*argv, "--name", "probe", "--dry-run", "--", "true"])

    # then
    assert (result.would_start, list(result.host_ids)) == (True, ["h1"])
    assert code == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["wouldStart"], shown["hostIds"]) == (True, ["h1"])
    assert await c.log.last_seq() == last
