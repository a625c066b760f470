"""`ReadModel` answers from a projected history: describe, lists, filters, pages, snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from google.protobuf import json_format

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State
from quartermaster.core.model import Job, JobStatus
from quartermaster.store import (
    InvalidFilterError,
    InvalidNextTokenError,
    Projector,
    ReadModel,
    arns,
)
from quartermaster.store import documents as docs
from quartermaster.testing.builders import a_job

from .histories import Recording, seed_history


def queued_history() -> Recording:
    """The seed history with more jobs waiting in QS2 and QS3."""
    r = seed_history()
    for name, share, prio in (
        ("q2a", "QS2", 1),
        ("q2b", "QS2", 5),
        ("q2c", "QS2", 1),
        ("q3a", "QS3", 2),
        ("q3b", "QS3", 4),
        ("q3c", "QS3", 4),
    ):
        r.w.clock += 1
        r.submit(a_job(name=name, priority=prio).in_share(share))
    r.pass_()
    return r


class Projected:
    def __init__(self, read: ReadModel, state: State) -> None:
        self.read = read
        self.state = state

    def jobs(self, keep: Any = lambda job: True) -> list[Job]:
        jobs = [j for j in self.state.jobs.values() if keep(j)]
        return sorted(jobs, key=lambda j: (j.created_at, j.job_id))

    def summaries(self, keep: Any = lambda job: True) -> list[dict[str, Any]]:
        """Job summaries newest first, the order ListServiceJobs answers in (as AWS)."""
        return [docs.job_summary(docs.job_doc(self.state, j)) for j in self.jobs(keep)][::-1]


@pytest_asyncio.fixture
async def projected(pg_pool: Any, schema_name: str) -> AsyncIterator[Projected]:
    history = queued_history()
    projector = Projector(pg_pool, schema_name)
    await projector.apply_many(history.batches())
    read = ReadModel(pg_pool, schema_name)
    try:
        yield Projected(read, history.w.state)
    finally:
        await read.close()


async def all_pages(list_page: Any, **kw: Any) -> tuple[list[dict[str, Any]], int]:
    out, token, pages = [], None, 0
    while True:
        page, token = await list_page(next_token=token, **kw)
        out.extend(page)
        pages += 1
        if token is None:
            return out, pages


# ---- jobs -----------------------------------------------------------------------------


async def test_describe_job_gives_the_detail_or_none(projected: Projected) -> None:
    for job in projected.state.jobs.values():
        assert await projected.read.describe_job(job.job_id) == docs.job_doc(projected.state, job)
    assert await projected.read.describe_job("nope") is None


async def test_list_jobs_pages_through_every_job_newest_first(projected: Projected) -> None:
    everything, token = await projected.read.list_jobs("q", max_results=1000)
    assert token is None
    assert everything == projected.summaries()
    for summary in everything:
        json_format.ParseDict(summary, pb.ServiceJobSummary())
    paged, pages = await all_pages(projected.read.list_jobs, job_queue="q", max_results=4)
    assert paged == everything
    assert pages == -(-len(everything) // 4)
    by_arn, _ = await projected.read.list_jobs(arns.job_queue("q"))
    assert by_arn == everything
    assert await projected.read.list_jobs("other") == ([], None)


async def test_list_jobs_filters_by_share_status_and_name(projected: Projected) -> None:
    read = projected.read
    qs1, _ = await read.list_jobs("q", quota_share="QS1")
    assert qs1 == projected.summaries(lambda j: j.share == "QS1")
    runnable = projected.summaries(lambda j: j.status is JobStatus.RUNNABLE)
    assert (await read.list_jobs("q", status="RUNNABLE"))[0] == runnable
    assert (await read.list_jobs("q", status="JOB_STATUS_RUNNABLE"))[0] == runnable
    assert (await read.list_jobs("q", status="JOB_STATUS_UNSPECIFIED"))[0] == projected.summaries()
    qs2_runnable, _ = await read.list_jobs("q", quota_share="QS2", status="RUNNABLE")
    assert [s["job_id"] for s in qs2_runnable] == ["q2c", "q2b", "q2a", "qs2_job_1"]
    # JOB_NAME as AWS: case-insensitive; a trailing * matches a prefix, nothing else is a wildcard.
    assert [s["job_id"] for s in (await read.list_jobs("q", job_name="WARM*"))[0]] == [
        "warm2",
        "warm1",
    ]
    assert (await read.list_jobs("q", job_name="q?a"))[0] == []
    assert [s["job_id"] for s in (await read.list_jobs("q", job_name="FLaky"))[0]] == ["flaky"]
    assert (await read.list_jobs("q", job_name="fla"))[0] == []
    assert (await read.list_jobs("q", job_name="q2_*"))[0] == []  # _ is no wildcard


async def test_list_jobs_filters_by_creation_time_in_ms(projected: Projected) -> None:
    pivot = projected.state.jobs["q2b"]
    pivot_ms = docs.epoch_ms(pivot.created_at)
    before, _ = await projected.read.list_jobs("q", before_created_at=pivot_ms)
    after, _ = await projected.read.list_jobs("q", after_created_at=pivot_ms)
    assert before == projected.summaries(lambda j: docs.epoch_ms(j.created_at) < pivot_ms)
    assert after == projected.summaries(lambda j: docs.epoch_ms(j.created_at) > pivot_ms)
    assert len(before) + len(after) + 1 == len(projected.state.jobs)
    # q2a, q2b and q2c were submitted 1001 ms apart; the bounds are exclusive.
    window, _ = await projected.read.list_jobs(
        "q", after_created_at=pivot_ms - 1001, before_created_at=pivot_ms + 1001
    )
    assert [s["job_id"] for s in window] == ["q2b"]
    window, _ = await projected.read.list_jobs(
        "q", after_created_at=pivot_ms - 1002, before_created_at=pivot_ms + 1002
    )
    assert [s["job_id"] for s in window] == ["q2c", "q2b", "q2a"]


async def test_bad_tokens_and_filters_are_refused(projected: Projected) -> None:
    read = projected.read
    with pytest.raises(InvalidNextTokenError):
        await read.list_jobs("q", next_token="not a token!")
    _, pools_token = await read.list_pools(max_results=1)
    assert pools_token is not None
    with pytest.raises(InvalidNextTokenError):
        await read.list_jobs("q", next_token=pools_token)
    with pytest.raises(InvalidFilterError):
        await read.list_jobs("q", status="SLEEPING")
    with pytest.raises(InvalidFilterError):
        await read.list_pools(status="Lukewarm")


# ---- warm pools and hosts -------------------------------------------------------------


async def test_list_pools_filters_and_pages(projected: Projected) -> None:
    state = projected.state
    expected = [docs.pool_doc(state, state.pools[p]) for p in sorted(state.pools)]
    assert (await projected.read.list_pools())[0] == expected
    paged, pages = await all_pages(projected.read.list_pools, max_results=1)
    assert paged == expected
    assert pages == len(expected)
    for spelling in ("Reused", "REUSED", "WARM_POOL_STATUS_REUSED"):
        reused, _ = await projected.read.list_pools(status=spelling)
        assert [p["job_id"] for p in reused] == ["warm1"]
    assert (await projected.read.list_pools(status="IN_USE"))[0] == []
    assert (await projected.read.list_pools(job_queue="q"))[0] == expected
    assert (await projected.read.list_pools(job_queue="other"))[0] == []
    for pool in expected:
        json_format.ParseDict(pool, pb.WarmPoolSummary())


async def test_list_hosts_by_state(projected: Projected) -> None:
    state = projected.state
    hosts = await projected.read.list_hosts()
    assert hosts == [docs.host_doc(state, state.hosts[h]) for h in sorted(state.hosts)]
    lost = await projected.read.list_hosts(state="NODE_STATE_LOST")
    assert [h["host_id"] for h in lost] == ["h2"]
    healthy = await projected.read.list_hosts(state="HEALTHY")
    assert [h["host_id"] for h in healthy] == ["h1", "h3"]
    assert await projected.read.list_hosts(service_environment="env") == []  # none bound


# ---- configuration --------------------------------------------------------------------


async def test_shares_describe_and_list(projected: Projected) -> None:
    state = projected.state
    described = await projected.read.describe_share("q", "QS1")
    assert described is not None
    share = state.shares[("q", "QS1")]
    assert described["capacity_usage"] == docs.share_usage(state, share)
    assert described["oversubscribed"] is docs.oversubscribed(state, share)
    assert described["quota_share"] == docs.share_doc(share, created_at=1000.0)
    json_format.ParseDict(described, pb.DescribeQuotaShareResponse())
    assert await projected.read.describe_share("q", "QS9") is None
    assert await projected.read.describe_share(arns.job_queue("q"), "QS1") == described
    page, token = await projected.read.list_shares("q", max_results=2)
    assert [s["quota_share_name"] for s in page] == ["QS1", "QS2"]
    rest, end = await projected.read.list_shares("q", max_results=2, next_token=token)
    assert [s["quota_share_name"] for s in rest] == ["QS3"]
    assert end is None


async def test_queues_and_environments_by_name_arn_or_all(projected: Projected) -> None:
    read = projected.read
    [queue] = await read.describe_queues(None)
    assert queue["job_queue_name"] == "q"
    assert queue["service_environment_order"] == [{"order": 1, "service_environment": "env"}]
    assert await read.describe_queues([arns.job_queue("q")]) == [queue]
    assert await read.describe_queues(["nope"]) == []
    [environment] = await read.describe_environments([])
    assert environment == docs.environment_doc(
        projected.state, projected.state.environments["env"], created_at=1000.0
    )
    assert environment["capacity"] == [
        {"capacity_unit": "ml.g5.xlarge", "max_capacity": 3, "usable_capacity": 2, "in_use": 2}
    ]
    json_format.ParseDict(environment, pb.ServiceEnvironmentDetail())
    json_format.ParseDict(queue, pb.JobQueueDetail())


# ---- queue snapshot -------------------------------------------------------------------


async def test_snapshot_lists_the_queue_front_in_dispatch_order(projected: Projected) -> None:
    state = projected.state
    snapshot = await projected.read.queue_snapshot("q")
    assert snapshot is not None
    json_format.ParseDict(snapshot, pb.GetJobQueueSnapshotResponse())
    runnable = sorted(
        (j for j in state.jobs.values() if j.status is JobStatus.RUNNABLE),
        key=lambda j: j.order_key(),
    )
    assert [f["job_id"] for f in snapshot["front_of_queue"]] == [j.job_id for j in runnable]
    assert [f["job_id"] for f in snapshot["front_of_queue"]][:3] == ["huge", "q2b", "q3c"]
    huge = snapshot["front_of_queue"][0]
    assert huge["status_reason"].startswith("MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE")
    assert huge["job_arn"] == arns.job("huge")
    assert snapshot["last_updated_at"] == docs.epoch_ms(state.now)
    shares = {s["quota_share_name"]: s for s in snapshot["quota_shares"]}
    assert shares["QS1"]["head_job_ids"] == ["huge", "high", "med"]
    assert shares["QS2"]["head_job_ids"] == ["q2b", "qs2_job_1", "q2a", "q2c"]
    assert shares["QS3"]["head_job_ids"] == ["q3c", "q3a"]  # q3b runs on QS3's own unit
    for name, share in shares.items():
        assert share["capacity_usage"] == docs.share_usage(state, state.shares[("q", name)])
    assert shares["QS1"]["capacity_usage"][0]["quantity"] == 1


async def test_snapshot_is_limited_and_unknown_queues_have_none(projected: Projected) -> None:
    snapshot = await projected.read.queue_snapshot("q", max_results=2)
    assert snapshot is not None
    assert [f["job_id"] for f in snapshot["front_of_queue"]] == ["huge", "q2b"]
    assert all(len(s["head_job_ids"]) <= 2 for s in snapshot["quota_shares"])
    assert await projected.read.queue_snapshot("nope") is None


# ---- client tokens --------------------------------------------------------------------


async def test_a_client_token_is_claimed_once(pg_pool: Any, schema_name: str) -> None:
    await Projector(pg_pool, schema_name).prepare()
    read = ReadModel(pg_pool, schema_name)
    assert await read.claim_client_token("tok-1", "q", "h1", "job-a") == ("job-a", "h1")
    assert await read.claim_client_token("tok-1", "q", "h1", "job-b") == ("job-a", "h1")
    assert await read.claim_client_token("tok-1", "q", "h2", "job-c") == ("job-a", "h1")
    assert await read.claim_client_token("tok-2", "q", "h2", "job-d") == ("job-d", "h2")


async def test_concurrent_claims_of_one_token_agree_on_one_winner(
    pg_pool: Any, schema_name: str
) -> None:
    await Projector(pg_pool, schema_name).prepare()
    read = ReadModel(pg_pool, schema_name)
    claims = await asyncio.gather(
        *(read.claim_client_token("race", "q", "same", f"job-{i}") for i in range(8))
    )
    assert len(set(claims)) == 1
    winner, digest = claims[0]
    assert digest == "same"
    assert winner in {f"job-{i}" for i in range(8)}
