"""The client's channel: reads are retried on UNAVAILABLE, writes are not; keepalive is on.

A real gRPC server on a free port answers the first call of each method UNAVAILABLE.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.client import Quartermaster, QuartermasterError
from quartermaster.client.credentials import CHANNEL_OPTIONS, SERVICE_CONFIG


class FlakyJobs(rpc.ServiceJobsServicer):
    """Every method fails its first call with UNAVAILABLE, then answers."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def _first_fails(self, method: str, context: Any) -> None:
        self.calls[method] += 1
        if self.calls[method] == 1:
            context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")

    def DescribeServiceJob(self, request: Any, context: Any) -> pb.DescribeServiceJobResponse:
        self._first_fails("DescribeServiceJob", context)
        return pb.DescribeServiceJobResponse(job=pb.ServiceJobDetail(job_id=request.job_id))

    def SubmitServiceJob(self, request: Any, context: Any) -> pb.SubmitServiceJobResponse:
        self._first_fails("SubmitServiceJob", context)
        return pb.SubmitServiceJobResponse(job_id="new")


@pytest.fixture
def flaky() -> Iterator[tuple[FlakyJobs, str]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    jobs = FlakyJobs()
    rpc.add_ServiceJobsServicer_to_server(jobs, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield jobs, f"127.0.0.1:{port}"
    server.stop(0)


def test_a_read_is_retried_on_unavailable(flaky: tuple[FlakyJobs, str]) -> None:
    jobs, address = flaky
    with Quartermaster(address, insecure=True) as client:
        assert client.describe_job("j1").job_id == "j1"
    assert jobs.calls["DescribeServiceJob"] == 2


def test_a_write_is_not_retried(flaky: tuple[FlakyJobs, str]) -> None:
    jobs, address = flaky
    with Quartermaster(address, insecure=True) as client, pytest.raises(QuartermasterError) as err:
        client.call(client.jobs.SubmitServiceJob, pb.SubmitServiceJobRequest(job_name="x"))
    assert err.value.code is grpc.StatusCode.UNAVAILABLE
    assert jobs.calls["SubmitServiceJob"] == 1


def test_the_retry_policy_names_reads_only_and_keepalive_is_set() -> None:
    (config,) = SERVICE_CONFIG["methodConfig"]
    methods = {entry["method"] for entry in config["name"]}
    assert {"DescribeServiceJob", "ListServiceJobs", "GetJobQueueSnapshot"} <= methods
    assert not methods & {"SubmitServiceJob", "TerminateServiceJob", "WatchServiceJobs"}
    options = dict(CHANNEL_OPTIONS)
    assert options["grpc.keepalive_time_ms"] == 30_000
    assert json.loads(str(options["grpc.service_config"])) == SERVICE_CONFIG
