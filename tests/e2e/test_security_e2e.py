"""The tenant boundary through gRPC on a secured stack (what `qm up` starts by default).

Every RPC refuses a call without credentials (UNAUTHENTICATED) and a role that
lacks its permission (PERMISSION_DENIED naming it); a member of one quota
share cannot see, change or end another share's jobs, nor change any quota;
an auditor reads and writes nothing; who asked is recorded on the events and
shown by DescribeServiceJob and the audit table.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import asyncpg
import grpc
import pytest
from scenario import LONG, QUEUE, UNIT, setup_queue, shell, status, until

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.auth import Role, ShareRef
from quartermaster.auth.local import LocalCredentials
from quartermaster.cli.main import main as qm
from quartermaster.client import Quartermaster, QuartermasterError, TrainingQueue
from quartermaster.store import arns
from quartermaster_stack.thread import StackThread

SERVICES = ("QuotaManagement", "ServiceJobs", "WarmPools", "Nodes")
ADMIN_ONLY = {
    "CreateServiceEnvironment",
    "UpdateServiceEnvironment",
    "CreateSchedulingPolicy",
    "CreateJobQueue",
    "UpdateJobQueue",
    "CreateQuotaShare",
    "UpdateQuotaShare",
    "DeleteQuotaShare",
    "DeleteServiceEnvironment",
    "UpdateSchedulingPolicy",
    "DeleteSchedulingPolicy",
    "DeleteJobQueue",
    "DrainNode",
    "UndrainNode",
}
WRITES = ADMIN_ONLY | {
    "SubmitServiceJob",
    "SubmitServiceJobs",
    "UpdateServiceJob",
    "TerminateServiceJob",
    "UpdateWarmPool",
    "TagResource",  # members: their own shares' jobs only
    "UntagResource",
}


def every_rpc() -> list[tuple[str, str, Any]]:
    methods = []
    for service in SERVICES:
        descriptor = pb.DESCRIPTOR.services_by_name[service]
        for method in descriptor.methods:
            methods.append((service, method.name, method))
    return methods


def _stub_call(channel: grpc.Channel, service: str, method: Any, token: str | None) -> Any:
    """Call `method` with an empty request; returns the status code."""
    stub = getattr(rpc, f"{service}Stub")(channel)
    request = getattr(pb, method.input_type.name)()
    metadata = () if token is None else (("authorization", f"Bearer {token}"),)
    try:
        reply = getattr(stub, method.name)(request, metadata=metadata, timeout=10)
        if method.server_streaming:
            for _ in reply:
                break
    except grpc.RpcError as err:
        return err.code(), err.details()
    return grpc.StatusCode.OK, ""


class Secured:
    def __init__(self, stack: StackThread) -> None:
        self.stack = stack
        assert stack.credentials_dir is not None
        self.creds = LocalCredentials(stack.credentials_dir)
        ca = self.creds.ca.read_bytes()
        self.channel = grpc.secure_channel(
            stack.address, grpc.ssl_channel_credentials(root_certificates=ca)
        )

        other = LocalCredentials.ensure(
            stack.credentials_dir.parent / "other", dt.datetime.now(dt.UTC)
        )
        self.forged_admin = other.issue("admin", [Role.ADMIN], issued_at=time.time())

    def token(self, subject: str, role: Role, *shares: str) -> str:
        return self.creds.issue(
            subject, [role], [ShareRef.parse(s) for s in shares], issued_at=time.time()
        )

    def client(self, token: str) -> Quartermaster:
        return Quartermaster(self.stack.address, timeout=20, token=token, ca_file=self.creds.ca)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    from quartermaster_stack.settings import StackSettings

    settings = StackSettings(
        data_dir=tmp_path_factory.mktemp("secure") / "data",
        nodes=2,
        grpc_port=0,
        stop_grace_seconds=2,
        heartbeat_seconds=1,
        tick_seconds=1,
    )
    with StackThread(settings) as stack:
        s = Secured(stack)
        admin = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
        setup_queue(
            admin,
            2,
            [("A", 1, "LEND_AND_BORROW", None, False), ("B", 1, "LEND_AND_BORROW", None, False)],
        )
        admin.close()
        yield s
        s.channel.close()


@pytest.mark.parametrize(("service", "name", "method"), every_rpc(), ids=lambda v: str(v))
def test_every_rpc_refuses_calls_without_credentials(
    secured: Secured, service, name, method
) -> None:  # type: ignore[no-untyped-def]
    code, details = _stub_call(secured.channel, service, method, None)
    assert code == grpc.StatusCode.UNAUTHENTICATED, (name, details)
    code, _ = _stub_call(secured.channel, service, method, "not-a-jwt")
    assert code == grpc.StatusCode.UNAUTHENTICATED, name
    code, _ = _stub_call(secured.channel, service, method, secured.forged_admin)
    assert code == grpc.StatusCode.UNAUTHENTICATED, (name, "a token signed by another key")


@pytest.mark.parametrize(("service", "name", "method"), every_rpc(), ids=lambda v: str(v))
def test_roles_lacking_a_permission_are_denied_by_name(
    secured: Secured, service, name, method
) -> None:  # type: ignore[no-untyped-def]
    member = secured.token("team-a", Role.MEMBER, f"{QUEUE}/A")
    auditor = secured.token("audit", Role.AUDITOR)
    code, details = _stub_call(secured.channel, service, method, auditor)
    if name in WRITES:
        assert code == grpc.StatusCode.PERMISSION_DENIED, (name, details)
        assert "permission" in details
    else:
        assert code != grpc.StatusCode.PERMISSION_DENIED, (name, details)
        assert code != grpc.StatusCode.UNAUTHENTICATED, (name, details)
    code, details = _stub_call(secured.channel, service, method, member)
    if name in ADMIN_ONLY or name in ("ListNodes", "DescribeServiceEnvironments", "ListWarmPools"):
        assert code == grpc.StatusCode.PERMISSION_DENIED, (name, details)
        assert "permission" in details and "team-a" in details


def test_a_member_sees_and_changes_only_its_own_shares_jobs(secured: Secured) -> None:
    admin_token = secured.creds.admin_token.read_text()
    admin = secured.client(admin_token)
    a = secured.client(secured.token("team-a", Role.MEMBER, f"{QUEUE}/A"))
    b = secured.client(secured.token("team-b", Role.MEMBER, f"{QUEUE}/B"))
    mine = TrainingQueue(QUEUE, a).submit(shell(LONG), job_name="a-job", quota_share_name="A")
    theirs = TrainingQueue(QUEUE, b).submit(shell(LONG), job_name="b-job", quota_share_name="B")
    until(
        "both run", lambda: status(admin, mine.job_id) == status(admin, theirs.job_id) == "RUNNING"
    )
    seq_before = admin.seq

    def denied(call: Any) -> str:
        with pytest.raises(QuartermasterError) as err:
            call()
        assert err.value.code == grpc.StatusCode.PERMISSION_DENIED, err.value
        return err.value.details

    assert "not a member" in denied(
        lambda: TrainingQueue(QUEUE, a).submit(shell("true"), job_name="x", quota_share_name="B")
    )
    assert "jobs:read" in denied(lambda: a.describe_job(theirs.job_id))
    assert "jobs:update" in denied(
        lambda: a.call(
            a.jobs.UpdateServiceJob,
            pb.UpdateServiceJobRequest(job_id=theirs.job_id, scheduling_priority=9),
        )
    )
    assert "jobs:terminate" in denied(
        lambda: a.call(
            a.jobs.TerminateServiceJob,
            pb.TerminateServiceJobRequest(job_id=theirs.job_id, reason="x"),
        )
    )
    assert "config:write" in denied(
        lambda: a.update_quota_share(QUEUE, "B", {UNIT: 0}, "LEND_AND_BORROW", None, False)
    )
    # Tags (AWS TagResource): a member tags its own shares' jobs, not another's, nor config.
    a.call(
        a.quota.TagResource,
        pb.TagResourceRequest(resource_arn=arns.job(mine.job_id), tags={"k": "v"}),
    )
    tag_theirs = pb.TagResourceRequest(resource_arn=arns.job(theirs.job_id), tags={"k": "v"})
    assert "tags:write" in denied(lambda: a.call(a.quota.TagResource, tag_theirs))
    tag_queue = pb.TagResourceRequest(resource_arn=arns.job_queue(QUEUE), tags={"k": "v"})
    assert "config:write" in denied(lambda: a.call(a.quota.TagResource, tag_queue))
    listed = admin.call(
        admin.quota.ListTagsForResource,
        pb.ListTagsForResourceRequest(resource_arn=arns.job(mine.job_id)),
    )
    assert dict(listed.tags)["k"] == "v"
    assert "nodes:write" in denied(lambda: a.drain_node("node-1"))
    by_share = pb.ListServiceJobsRequest(job_queue=QUEUE, quota_share_name="B")
    assert "jobs:read" in denied(lambda: a.call(a.jobs.ListServiceJobs, by_share))
    # Listing without a share filter shows only the caller's own shares.
    assert {j.job_name for j in a.list_jobs(QUEUE, "RUNNING")} == {"a-job"}
    assert {j.job_name for j in admin.list_jobs(QUEUE, "RUNNING")} == {"a-job", "b-job"}
    # A refused bulk item does not stop the allowed ones.
    reply = a.call(
        a.jobs.SubmitServiceJobs,
        pb.SubmitServiceJobsRequest(
            jobs=[
                pb.SubmitServiceJobRequest(job_queue=QUEUE, quota_share_name="B", job_name="x"),
            ]
        ),
    )
    assert reply.results[0].error.code == "PERMISSION_DENIED"
    # Nothing the member was refused changed theirs.
    detail = admin.describe_job(theirs.job_id)
    assert (detail.scheduling_priority, status(admin, theirs.job_id)) == (0, "RUNNING")
    assert detail.submitted_by == "team-b"
    assert admin.seq >= seq_before
    # The member's own job: updated and terminated by the member, recorded as such.
    mine.update(scheduling_priority=3)
    mine.terminate("done")
    until("a-job ended", lambda: status(admin, mine.job_id) == "FAILED")
    own = a.describe_job(mine.job_id)
    assert (own.submitted_by, own.priority_updated_by, own.terminated_by) == (
        "team-a",
        "team-a",
        "team-a",
    )
    admin.call(
        admin.jobs.TerminateServiceJob,
        pb.TerminateServiceJobRequest(job_id=theirs.job_id, reason="cleanup"),
    )
    assert admin.describe_job(theirs.job_id).terminated_by == "admin"
    for c in (admin, a, b):
        c.close()


def test_the_audit_table_records_who_asked(secured: Secured) -> None:
    stack = secured.stack.stack

    async def rows() -> list[Any]:
        conn = await asyncpg.connect(stack.postgres_url)
        try:
            return list(
                await conn.fetch(
                    "SELECT type, principal FROM qm.audit WHERE principal <> '' ORDER BY seq, idx"
                )
            )
        finally:
            await conn.close()

    found = asyncio.run(rows())
    kinds = {(r["type"], r["principal"]) for r in found}
    assert ("job_queue.created", "admin") in kinds
    assert ("quota_share.created", "admin") in kinds


def test_plaintext_and_the_token_cli(secured: Secured, capsys: pytest.CaptureFixture[str]) -> None:
    plain = Quartermaster(secured.stack.address, insecure=True, timeout=5)
    with pytest.raises(QuartermasterError) as err:
        plain.list_nodes()
    assert err.value.code == grpc.StatusCode.UNAVAILABLE  # a TLS server does not talk plaintext
    plain.close()
    data_dir = str(secured.stack.credentials_dir.parent)  # type: ignore[union-attr]
    assert (
        qm(["token", "issue", "--data-dir", data_dir, "--subject", "ops", "--role", "auditor"]) == 0
    )
    token = capsys.readouterr().out.strip()
    auditor = secured.client(token)
    assert auditor.list_nodes()  # an auditor reads
    with pytest.raises(QuartermasterError) as err:
        auditor.drain_node("node-1")
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    auditor.close()
    assert qm(["token", "issue", "--data-dir", data_dir, "--subject", "m", "--role", "member"]) == 2
    assert "--share" in capsys.readouterr().err
    address = [
        "--address",
        secured.stack.address,
        "--credentials",
        str(secured.stack.credentials_dir),
    ]
    assert qm([*address, "nodes", "list"]) == 0
    assert "node-1" in capsys.readouterr().out
