"""Bugs `bench/fuzz_admission.py` found in admission, each pinned by the smallest repro.

1. A cached bearer token outlived its `exp`: the cache never looked at it again.
2. A member could update or terminate another share's job (or change its warm pool)
   when its request met admission before the follower had folded that job: the share
   check ran on the stale view and skipped an unknown id, the write's caught-up plan
   then found the job. The check now runs inside the plan, on the state it writes on.
3. GetJobQueueSnapshot showed a member the other shares' job ids and names.
4. Bytes that are no message of the RPC's type were answered UNKNOWN from inside
   gRPC's deserializer; now INVALID_ARGUMENT.
5. A member reusing another share's client token (they are per queue) was told that
   share's job id in the ALREADY_EXISTS message.
6. ExplainServiceJob answered INTERNAL when its replay of the log came back short
   (under load) without the job the folded state holds; now UNAVAILABLE, try again.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import grpc
import pytest

from qm_admission import access
from qm_admission.authn import LEEWAY_S, Authenticator
from qm_admission.errors import Code, RequestRejected, TransientAdmissionError
from qm_admission.servicers import Backends, QuotaManagement, ServiceJobs, WarmPools
from qm_admission.servicers.explain import HIDDEN, ExplainingServiceJobs
from qm_admission.settings import Settings
from qm_admission.submission import SubmissionPlanner
from qm_admission.tokens import job_id_for_token
from qm_admission.writer import Plan, Written
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.auth import Principal, Role, ShareRef, issue_token
from quartermaster.auth.tokens import new_signing_key
from quartermaster.core import State
from quartermaster.testing.builders import World, a_job

from .conftest import Client

MEMBER_A = Principal(
    subject="team-a", roles=frozenset({Role.MEMBER}), shares=frozenset({ShareRef("q", "A")})
)
AUDITOR = Principal(subject="audit", roles=frozenset({Role.AUDITOR}))


# ---- 1. token cache ----------------------------------------------------------------


def test_a_cached_token_is_refused_once_it_has_expired() -> None:
    private, public = new_signing_key()
    now = time.time()
    # exp + leeway is 2 s from now: valid now, expired after the sleep.
    lifetime = 3600 - LEEWAY_S + 2
    token = issue_token(private, "ops", [Role.ADMIN], issued_at=now - 3600, lifetime_s=lifetime)
    authenticator = Authenticator(public)
    metadata = (("authorization", f"Bearer {token}"),)
    assert authenticator.principal(metadata).subject == "ops"  # verified, now cached
    time.sleep(max(0.0, now + 2.5 - time.time()))
    with pytest.raises(RequestRejected) as refused:
        authenticator.principal(metadata)
    assert refused.value.code is Code.UNAUTHENTICATED
    assert "expired" in refused.value.message.lower()


# ---- 2. share scope on the state a write is planned on ----------------------------------


class StaleFollower:
    """A follower that has not folded the other share's job yet."""

    def __init__(self) -> None:
        self.state = State()
        self.seq = 0

    async def wait_for(self, seq: int, timeout: float) -> None:
        return None


class CaughtUpWriter:
    """Plans on the caught-up state (which holds the job), as `RequestWriter` re-plans."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.appended: list[Plan[Any]] = []
        self.last_seq = 0
        self.max_envelope_bytes = 1 << 20

    async def write(self, planner: Any) -> Written[Any]:
        plan = planner(self.state, 2_000.0)
        if inspect.isawaitable(plan):  # submissions plan asynchronously (client tokens)
            plan = await plan
        if plan.events:
            self.appended.append(plan)
        return Written(plan.result, 1, bool(plan.events))


class Context:
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    async def send_initial_metadata(self, metadata: Any) -> None:
        return None


def _backends(writer: CaughtUpWriter) -> Backends:
    return Backends(
        settings=Settings(),
        writer=writer,  # type: ignore[arg-type]
        follower=StaleFollower(),  # type: ignore[arg-type]
        consistency=None,  # type: ignore[arg-type]
        read_model=None,  # type: ignore[arg-type]
        hub=None,  # type: ignore[arg-type]
    )


def _world_with_b_job() -> World:
    w = World()
    w.environment("env", ml_g5_xlarge=2)
    w.queue("q", "env")
    w.share("A", 1)
    w.share("B", 1)
    w.submit(a_job(name="theirs").in_share("B"), job_id="b-job")
    return w


@pytest.mark.parametrize(
    ("servicer", "method", "request_"),
    [
        (ServiceJobs, "UpdateServiceJob", pb.UpdateServiceJobRequest(job_id="b-job")),
        (
            ServiceJobs,
            "TerminateServiceJob",
            pb.TerminateServiceJobRequest(job_id="b-job", reason="mine now"),
        ),
        (
            WarmPools,
            "UpdateWarmPool",
            pb.UpdateWarmPoolRequest(job_id="b-job", keep_alive_period_in_seconds=60),
        ),
    ],
)
async def test_a_member_cannot_write_another_shares_job_its_view_lacked(
    servicer: Any, method: str, request_: Any
) -> None:
    writer = CaughtUpWriter(_world_with_b_job().state)
    service = servicer(_backends(writer))
    token = access.current.set(MEMBER_A)
    try:
        with pytest.raises(RequestRejected) as refused:
            await getattr(service, method)(request_, Context())
    finally:
        access.current.reset(token)
    assert refused.value.code is Code.PERMISSION_DENIED
    assert "q/B" in refused.value.message
    assert writer.appended == []


# ---- 3. queue snapshot ------------------------------------------------------------------


class SnapshotConsistency:
    def __init__(self, state: State) -> None:
        self.state = state

    async def folded(self, context: Any) -> State:
        return self.state

    async def projected(self, context: Any) -> None:
        return None


class SnapshotReadModel:
    async def queue_snapshot(self, queue: str, limit: int) -> dict[str, Any]:
        return {
            "job_queue_name": queue,
            "front_of_queue": [
                {"job_id": "a-job", "job_name": "ours", "quota_share_name": "A"},
                {
                    "job_id": "b-job",
                    "job_name": "theirs",
                    "quota_share_name": "B",
                    "status_reason": "waiting for theirs",
                },
            ],
            "quota_shares": [
                {"quota_share_name": "A", "head_job_ids": ["a-job"]},
                {"quota_share_name": "B", "head_job_ids": ["b-job"]},
            ],
        }


async def _snapshot(principal: Principal) -> pb.GetJobQueueSnapshotResponse:
    backends = Backends(
        settings=Settings(),
        writer=None,  # type: ignore[arg-type]
        follower=None,  # type: ignore[arg-type]
        consistency=SnapshotConsistency(_world_with_b_job().state),  # type: ignore[arg-type]
        read_model=SnapshotReadModel(),  # type: ignore[arg-type]
        hub=None,  # type: ignore[arg-type]
    )
    token = access.current.set(principal)
    try:
        return await QuotaManagement(backends).GetJobQueueSnapshot(
            pb.GetJobQueueSnapshotRequest(job_queue="q"), Context()
        )
    finally:
        access.current.reset(token)


async def test_a_members_queue_snapshot_hides_the_other_shares_jobs() -> None:
    snapshot = await _snapshot(MEMBER_A)
    front = [(j.job_id, j.job_name, j.quota_share_name) for j in snapshot.front_of_queue]
    assert front == [("a-job", "ours", "A"), ("", HIDDEN, "B")]  # its place stays
    assert "theirs" not in str(snapshot) and "b-job" not in str(snapshot)
    heads = {s.quota_share_name: list(s.head_job_ids) for s in snapshot.quota_shares}
    assert heads == {"A": ["a-job"], "B": [""]}
    # Whoever reads everything still sees every job.
    full = await _snapshot(AUDITOR)
    assert [j.job_id for j in full.front_of_queue] == ["a-job", "b-job"]


# ---- 4. undecodable bytes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "streaming"),
    [("/qm.v1.Nodes/ListNodes", False), ("/qm.v1.ServiceJobs/WatchServiceJobs", True)],
)
async def test_bytes_that_are_no_request_message_are_invalid_argument(
    admission: Client, path: str, streaming: bool
) -> None:
    garbage = b"\x08" + b"\xff" * 11  # a varint longer than ten bytes
    with pytest.raises(grpc.aio.AioRpcError) as err:
        if streaming:
            async for _ in admission.channel.unary_stream(path)(garbage, timeout=10):
                pass
        else:
            await admission.channel.unary_unary(path)(garbage, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert "not a valid message" in (err.value.details() or "")


# ---- 5. client tokens -------------------------------------------------------------------


class ClaimedElsewhere:
    """A read model where the token was claimed for another request (B's job)."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id

    async def claim_client_token(
        self, token: str, queue: str, digest: str, job_id: str
    ) -> tuple[str, str]:
        return self.job_id, "the digest of B's request"


@pytest.mark.parametrize(("principal", "shown"), [(MEMBER_A, False), (AUDITOR, True)])
async def test_another_shares_client_token_does_not_reveal_its_job(
    principal: Principal, shown: bool
) -> None:
    theirs = job_id_for_token("q", "nightly-1")
    w = _world_with_b_job()
    w.submit(a_job(name="nightly").in_share("B"), job_id=theirs)
    planner = SubmissionPlanner(ClaimedElsewhere(theirs), 3600)  # type: ignore[arg-type]
    request = pb.SubmitServiceJobRequest(
        job_name="mine", job_queue="q", quota_share_name="A", client_token="nightly-1"
    )
    token = access.current.set(principal)
    try:
        plan = await planner.plan([request], w.state, 2_000.0)
    finally:
        access.current.reset(token)
    (outcome,) = plan.result
    assert isinstance(outcome, RequestRejected)
    assert (outcome.code, outcome.field) == (Code.ALREADY_EXISTS, "client_token")
    assert (theirs in outcome.message) is shown


# ---- 6. a short replay ------------------------------------------------------------------


class ShortLog:
    """A log whose read ends before the job's messages (as a read cut short does)."""

    async def read(self, from_seq: int = 1, until_seq: int | None = None) -> Any:
        for _ in ():
            yield


class FollowerWithJob:
    def __init__(self, state: State) -> None:
        self.state = state
        self.seq = 40
        self.log = ShortLog()


async def test_a_replay_that_comes_back_short_is_transient_not_internal() -> None:
    state = _world_with_b_job().state
    backends = Backends(
        settings=Settings(),
        writer=CaughtUpWriter(state),  # type: ignore[arg-type]
        follower=FollowerWithJob(state),  # type: ignore[arg-type]
        consistency=SnapshotConsistency(state),  # type: ignore[arg-type]
        read_model=None,  # type: ignore[arg-type]
        hub=None,  # type: ignore[arg-type]
    )
    token = access.current.set(AUDITOR)
    try:
        with pytest.raises(TransientAdmissionError) as err:
            await ExplainingServiceJobs(backends).ExplainServiceJob(
                pb.ExplainServiceJobRequest(job_id="b-job"), Context()
            )
    finally:
        access.current.reset(token)
    assert "b-job" in str(err.value) and "40" in str(err.value)
