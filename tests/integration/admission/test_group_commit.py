"""Group commit through the real writer and stream: many calls in flight, each job once.

Concurrent submissions are planned and appended together (qm_admission.group_commit);
what a client sees must not change: its own job at once, a client token answering
one job however many calls race with it, and the largest documented bulk call fits.
"""

from __future__ import annotations

import asyncio
import json

from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

from .conftest import Client
from .test_admission_server import UNIT, describe, job, logged_events, set_up_queue


async def test_sixty_four_calls_in_flight_write_each_job_once(admission: Client) -> None:
    # given
    c = admission
    await set_up_queue(c)
    before = await c.log.last_seq()
    # when: 48 plain calls and 16 calls racing for 4 client tokens
    plain = [c.call(c.jobs.SubmitServiceJob, job(f"p{i}")) for i in range(48)]
    tokened = [
        c.call(c.jobs.SubmitServiceJob, job("t", client_token=f"tok-{i % 4}")) for i in range(16)
    ]
    replies = await asyncio.gather(*plain, *tokened)
    # then: 52 jobs, each in the log once, and each caller reads its own job at once
    ids = [r.job_id for r in replies]
    assert len(set(ids[:48])) == 48
    assert len(set(ids[48:])) == 4
    submitted = [e for e in await logged_events(c.log) if isinstance(e, ev.JobSubmitted)]
    assert sorted(e.job_id for e in submitted) == sorted(set(ids))
    assert await c.log.last_seq() - before <= 64
    for job_id in (ids[0], ids[47], ids[63]):
        assert (await describe(c, job_id)).job_id == job_id


async def test_the_largest_bulk_call_with_real_payloads_fits_one_message(admission: Client) -> None:
    # given: 1000 jobs (the documented maximum) with a payload of about 1 KB each
    c = admission
    await set_up_queue(c)
    payload = json.dumps(
        {
            "ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1},
            "HyperParameters": {f"param_{i}": "x" * 24 for i in range(24)},
        }
    )
    assert len(payload) > 900
    jobs = [job(f"bulk-{i}", service_request_payload=payload) for i in range(1000)]
    # when
    reply = await c.call(c.jobs.SubmitServiceJobs, pb.SubmitServiceJobsRequest(jobs=jobs))
    # then
    assert [r.WhichOneof("outcome") for r in reply.results] == ["job"] * 1000
    submitted = [e for e in await logged_events(c.log) if isinstance(e, ev.JobSubmitted)]
    assert len(submitted) == 1000
    last = reply.results[999].job.job_id
    assert (await describe(c, last)).job_id == last  # the read model holds them all
