"""The client sends its bearer token on every call of a TLS channel, unary and
streaming, beside the metadata it sets itself; a plaintext channel carries none.

A real gRPC server with a certificate from `auth.pki` records what each call got.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.auth import pki
from quartermaster.client import Quartermaster

TOKEN = "the-token"


class RecordingJobs(rpc.ServiceJobsServicer):
    def __init__(self) -> None:
        self.seen: list[tuple[str, list[tuple[str, str]]]] = []

    def _record(self, method: str, context: Any) -> None:
        self.seen.append((method, [(k, v) for k, v in context.invocation_metadata()]))

    def DescribeServiceJob(self, request: Any, context: Any) -> pb.DescribeServiceJobResponse:
        self._record("DescribeServiceJob", context)
        return pb.DescribeServiceJobResponse(job=pb.ServiceJobDetail(job_id=request.job_id))

    def WatchServiceJobs(self, request: Any, context: Any) -> Iterator[Any]:
        self._record("WatchServiceJobs", context)
        return iter(())


def serve(tls: pki.KeyPair | None) -> tuple[grpc.Server, RecordingJobs, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    jobs = RecordingJobs()
    rpc.add_ServiceJobsServicer_to_server(jobs, server)
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        credentials = grpc.ssl_server_credentials([(tls.key_pem, tls.cert_pem)])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    return server, jobs, f"127.0.0.1:{port}"


@pytest.fixture
def ca(tmp_path: Path) -> tuple[pki.KeyPair, Path]:
    authority = pki.new_ca("test-ca", dt.datetime.now(dt.UTC))
    ca_file = tmp_path / "ca.pem"
    ca_file.write_bytes(authority.cert_pem)
    return authority, ca_file


def test_every_call_of_a_tls_channel_carries_the_token(ca: tuple[pki.KeyPair, Path]) -> None:
    # given: a TLS server
    authority, ca_file = ca
    leaf = pki.issue_leaf(
        authority, "admission", dt.datetime.now(dt.UTC), server_names=["127.0.0.1"]
    )
    server, jobs, address = serve(leaf)
    try:
        # when: a unary read (with the client's own metadata) and a server stream
        with Quartermaster(address, token=TOKEN, ca_file=ca_file, insecure=False) as client:
            assert client.describe_job("j1").job_id == "j1"
            list(client.jobs.WatchServiceJobs(pb.WatchServiceJobsRequest(), timeout=10))
    finally:
        server.stop(0)
    # then: both carried the token once, and the unary call its own metadata too
    assert [method for method, _ in jobs.seen] == ["DescribeServiceJob", "WatchServiceJobs"]
    for _, metadata in jobs.seen:
        assert [v for k, v in metadata if k == "authorization"] == [f"Bearer {TOKEN}"]
    assert "x-qm-min-seq" in dict(jobs.seen[0][1])


def test_a_plaintext_channel_carries_no_token() -> None:
    server, jobs, address = serve(None)
    try:
        with Quartermaster(address, token=TOKEN, insecure=True) as client:
            assert client.describe_job("j1").job_id == "j1"
    finally:
        server.stop(0)
    ((_, metadata),) = jobs.seen
    assert "authorization" not in dict(metadata)
