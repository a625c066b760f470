"""Where a write's `x-qm-seq` travels: initial metadata unless the client asks for a trailer.

`x-qm-seq-in: trailer` moves the position into the trailing metadata (sent with the
status, no send of its own); clients that do not ask keep it in the initial metadata.
Read-your-writes must hold either way, across replicas too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from qm_admission.consistency import SEQ_IN_KEY, SEQ_KEY
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client import Quartermaster

from .conftest import Client, Starter
from .test_admission_server import INVALID, UNIT, field_of, job, rejection, set_up_queue

TRAILER = ((SEQ_IN_KEY, "trailer"),)


def seqs(metadata: Any) -> list[str]:
    return [str(value) for key, value in metadata or () if key == SEQ_KEY]


async def answered(
    method: Any, request: Any, metadata: Any = ()
) -> tuple[Any, list[str], list[str]]:
    """The reply, and the x-qm-seq values of its initial and of its trailing metadata."""
    call = method(request, metadata=metadata, timeout=20)
    reply = await call
    return reply, seqs(await call.initial_metadata()), seqs(await call.trailing_metadata())


async def test_a_submit_that_asks_gets_its_seq_in_the_trailer_and_a_replica_reads_it(
    start_admission: Starter,
) -> None:
    # given
    writer = await start_admission()
    reader = await start_admission(projector=False)
    await set_up_queue(writer)
    # when
    reply, initial, trailing = await answered(writer.jobs.SubmitServiceJob, job(), TRAILER)
    # then: the position is in the trailer only, and it is the append's
    assert initial == []
    assert trailing == [str(await writer.log.last_seq())]
    detail = await reader.call(
        reader.jobs.DescribeServiceJob,
        pb.DescribeServiceJobRequest(job_id=reply.job_id),
        min_seq=int(trailing[0]),
    )
    assert detail.job.job_id == reply.job_id


async def test_other_writes_that_ask_get_their_seq_in_the_trailer(admission: Client) -> None:
    c = admission
    request = pb.CreateServiceEnvironmentRequest(
        service_environment_name="env",
        capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=1)],
    )

    _, initial, trailing = await answered(c.quota.CreateServiceEnvironment, request, TRAILER)

    assert (initial, trailing) == ([], [str(await c.log.last_seq())])


async def test_a_client_that_does_not_ask_gets_the_seq_in_the_initial_metadata(
    admission: Client,
) -> None:
    c = admission
    await set_up_queue(c)

    _, initial, trailing = await answered(c.jobs.SubmitServiceJob, job())
    _, initial_bulk, trailing_bulk = await answered(
        c.jobs.SubmitServiceJobs, pb.SubmitServiceJobsRequest(jobs=[job("a"), job("b")])
    )
    _, asked_initial, asked_trailing = await answered(
        c.jobs.SubmitServiceJob, job("c"), ((SEQ_IN_KEY, "initial"),)
    )

    last = await c.log.last_seq()
    assert (initial, trailing) == ([str(last - 2)], [])
    assert (initial_bulk, trailing_bulk) == ([str(last - 1)], [])
    assert (asked_initial, asked_trailing) == ([str(last)], [])


async def test_a_bad_carrier_is_refused_naming_it_and_writes_nothing(admission: Client) -> None:
    c = admission
    await set_up_queue(c)
    before = await c.log.last_seq()

    error = await rejection(c.jobs.SubmitServiceJob(job(), metadata=((SEQ_IN_KEY, "both"),)))

    assert (error.code(), field_of(error)) == (INVALID, SEQ_IN_KEY)
    assert await c.log.last_seq() == before


async def test_the_python_client_reads_its_writes_through_the_trailer(
    start_admission: Starter,
) -> None:
    # given: the blocking client on the writer, a replica without a projector to read from
    writer = await start_admission()
    reader = await start_admission(projector=False)
    client = Quartermaster(f"127.0.0.1:{writer.port}", insecure=True)

    def submit_one() -> tuple[str, int]:
        client.create_service_environment("env", {UNIT: 4})
        client.create_scheduling_policy("fifo")
        client.create_job_queue("q", "env", "fifo")
        client.create_quota_share("q", "QS1", {UNIT: 2})
        reply = client.call(client.jobs.SubmitServiceJob, job())
        return str(reply.job_id), client.seq

    try:
        # when
        job_id, seq = await asyncio.to_thread(submit_one)
    finally:
        client.close()
    # then: the client took the submit's position, which a replica's read can wait for
    assert seq == await writer.log.last_seq()
    detail = await reader.call(
        reader.jobs.DescribeServiceJob, pb.DescribeServiceJobRequest(job_id=job_id), min_seq=seq
    )
    assert detail.job.job_id == job_id
