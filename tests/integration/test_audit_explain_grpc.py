"""ExplainServiceJob through gRPC: admission replays the log it follows and explains a job."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
import pytest_asyncio
from audit_seed import append_seed

from qm_admission.consistency import MIN_SEQ_KEY
from qm_admission.server import create_server, stop_server
from qm_admission.servicers.explain import HIDDEN
from qm_admission.settings import Settings
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.auth import Role, ShareRef, issue_token
from quartermaster.auth.tokens import new_signing_key
from quartermaster.bus import JetStreamLog
from quartermaster.cancelling import cancel_and_wait
from quartermaster.cli.main import main
from quartermaster.eventlog import LogFollower
from quartermaster.store import Projector, ReadModel

SCHEMA = "qm"
TEARDOWN_SECONDS = 15.0
Explain = Callable[..., Awaitable[pb.ExplainServiceJobResponse]]


class Admission:
    def __init__(self, port: int, private_key: bytes, last_seq: int) -> None:
        self.port = port
        self.private_key = private_key
        self.last_seq = last_seq
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.jobs = rpc.ServiceJobsStub(self.channel)  # type: ignore[no-untyped-call]

    async def explain(
        self, job_id: str, roles: set[Role], shares: frozenset[ShareRef] = frozenset()
    ) -> pb.ExplainServiceJobResponse:
        token = issue_token(self.private_key, "someone", roles, shares, issued_at=time.time())
        metadata = (("authorization", f"Bearer {token}"), (MIN_SEQ_KEY, str(self.last_seq)))
        request = pb.ExplainServiceJobRequest(job_id=job_id)
        reply: pb.ExplainServiceJobResponse = await self.jobs.ExplainServiceJob(
            request, metadata=metadata, timeout=20
        )
        return reply


@contextlib.asynccontextmanager
async def serving(settings: Settings, event_log: JetStreamLog, pool: Any) -> AsyncIterator[int]:
    read_model = ReadModel(pool, SCHEMA)
    projector = Projector(pool, SCHEMA)
    follower = LogFollower(event_log)
    server, port = await create_server(settings, event_log, follower, read_model, projector)
    await follower.start()
    projecting = asyncio.create_task(projector.run(event_log))
    try:
        yield port
    finally:
        await stop_server(server, 0)
        await cancel_and_wait(projecting, again_after=1.0)
        await follower.stop()
        await read_model.close()


@pytest_asyncio.fixture
async def admission(
    jetstream_log: JetStreamLog, pg_dsn: str, tmp_path: Path
) -> AsyncIterator[Admission]:
    """Admission with bearer tokens, following a stream that holds the seed scenario."""
    stored = await append_seed(jetstream_log)
    private, public = new_signing_key()
    key_file = tmp_path / "token.pub"
    key_file.write_bytes(public)
    settings = Settings(
        stream=jetstream_log.stream,
        subject_prefix=jetstream_log.prefix,
        pg_schema=SCHEMA,
        read_timeout_seconds=10.0,
        token_public_key_file=str(key_file),
    )
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=8)
    await Projector(pool, SCHEMA).prepare()
    try:
        async with serving(settings, jetstream_log, pool) as port:
            client = Admission(port, private, stored[-1].seq)
            yield client
            await client.channel.close()
    finally:
        await close(pool)


async def close(pool: Any) -> None:
    """Bounded, as the admission fixtures do: a stuck close fails here, not at the timeout."""
    try:
        await asyncio.wait_for(pool.close(), TEARDOWN_SECONDS)
    except TimeoutError:
        pool.terminate()
        raise


async def test_explain_the_reclaim_of_med(admission: Admission) -> None:
    reply = await admission.explain("med", {Role.ADMIN})
    assert (reply.job_id, reply.quota_share_name) == ("med", "QS1")
    assert reply.status == pb.JOB_STATUS_RUNNABLE and reply.waiting_reason.startswith("WAITING:")
    preempt = next(t for t in reply.transitions if t.event_type == "job.preemption_requested")
    assert preempt.source == "decision" and preempt.from_status == pb.JOB_STATUS_RUNNING
    d = preempt.decision
    assert d.rule == "RECLAIM" and d.for_job_id == "qs2_job_1"
    assert [(c.job_id, c.chosen) for c in d.candidates] == [("med", True), ("high", False)]
    usage = {
        u.quota_share_name: (u.usage.quantity, u.usage.max_capacity) for u in preempt.share_usage
    }
    assert usage == {"QS1": (2, 1), "QS2": (0, 1), "QS3": (0, 1)}
    stop = reply.transitions[-1]
    assert stop.event_type == "job.stop_confirmed" and stop.decision_sequence == preempt.sequence


async def test_explain_the_in_share_preemption_of_high(admission: Admission) -> None:
    reply = await admission.explain("high", {Role.AUDITOR})  # auditors read everything
    preempt = next(t for t in reply.transitions if t.decision.rule == "IN_SHARE")
    assert preempt.decision.for_job_id == "low"
    assert [c.job_id for c in preempt.decision.candidates] == ["high"]


async def test_a_member_sees_no_other_shares_job_names(admission: Admission) -> None:
    reply = await admission.explain("qs2_job_1", {Role.MEMBER}, frozenset({ShareRef("q", "QS2")}))
    made_room = next(t for t in reply.transitions if t.event_type == "job.preemption_requested")
    assert {c.job_name for c in made_room.decision.candidates} == {HIDDEN}
    assert "med" not in made_room.summary and HIDDEN in made_room.summary
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await admission.explain("med", {Role.MEMBER}, frozenset({ShareRef("q", "QS2")}))
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED


async def test_bad_requests_name_the_field(admission: Admission) -> None:
    for job_id, code in (
        ("", grpc.StatusCode.INVALID_ARGUMENT),
        ("nope", grpc.StatusCode.NOT_FOUND),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await admission.explain(job_id, {Role.ADMIN})
        assert refused.value.code() is code
        assert "job_id" in (refused.value.details() or "")


async def test_qm_explain_over_grpc(
    jetstream_log: JetStreamLog, pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`qm explain JOB_ID` asks admission (a plaintext development stack here)."""
    stored = await append_seed(jetstream_log)
    settings = Settings(
        stream=jetstream_log.stream,
        subject_prefix=jetstream_log.prefix,
        pg_schema=SCHEMA,
        read_timeout_seconds=10.0,
        insecure=True,
    )
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=8)
    await Projector(pool, SCHEMA).prepare()
    try:
        async with serving(settings, jetstream_log, pool) as port:
            follower_caught_up = time.monotonic() + 10
            argv = ["--address", f"127.0.0.1:{port}", "--insecure", "explain", "high"]
            while True:  # the CLI sends no min-seq: wait until the follower holds the log
                status = await asyncio.to_thread(main, argv)
                out = capsys.readouterr()
                if status == 0 or time.monotonic() > follower_caught_up:
                    break
                await asyncio.sleep(0.1)
    finally:
        await close(pool)
    assert status == 0, out.err
    assert f"the log up to seq {stored[-1].seq}" in out.out
    assert "rule IN_SHARE" in out.out and "* high" in out.out


async def test_explains_beyond_the_waiting_limit_are_refused_not_queued(
    admission: Admission, monkeypatch: pytest.MonkeyPatch
) -> None:
    from qm_admission.servicers import explain

    monkeypatch.setattr(explain, "MAX_WAITING", 0)  # every replay slot "taken"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await admission.explain("med", {Role.ADMIN})
    assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    monkeypatch.setattr(explain, "MAX_WAITING", 8)
    assert (await admission.explain("med", {Role.ADMIN})).job_id == "med"
