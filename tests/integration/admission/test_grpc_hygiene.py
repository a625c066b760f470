"""gRPC done right on a real admission server: health Watch, reflection v1 and v1alpha,
`google.rpc.Status` details on every refusal, and reads bounded by the call's deadline."""

from __future__ import annotations

import asyncio
import logging

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2
from grpc_status import rpc_status

from qm_admission.consistency import MIN_SEQ_KEY
from qm_admission.reflection import V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME
from qm_admission.server import SERVICE_NAMES
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

from .conftest import Client

pytestmark = pytest.mark.asyncio


async def test_health_watch_streams_the_serving_status(admission: Client) -> None:
    stub = health_pb2_grpc.HealthStub(admission.channel)  # type: ignore[no-untyped-call]
    for service in ("", SERVICE_NAMES[0]):
        stream = stub.Watch(health_pb2.HealthCheckRequest(service=service))
        first = await asyncio.wait_for(stream.read(), 10)
        stream.cancel()
        assert first.status == health_pb2.HealthCheckResponse.SERVING, service


async def _list_services(admission: Client, service: str) -> set[str]:
    method = admission.channel.stream_stream(
        f"/{service}/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    stream = method()
    await stream.write(reflection_pb2.ServerReflectionRequest(list_services=""))
    reply = await asyncio.wait_for(stream.read(), 10)
    await stream.done_writing()
    return {s.name for s in reply.list_services_response.service}


@pytest.mark.parametrize("service", [V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME])
async def test_reflection_lists_the_services_in_both_versions(
    admission: Client, service: str
) -> None:
    names = await _list_services(admission, service)
    assert set(SERVICE_NAMES) <= names
    assert {"grpc.health.v1.Health", V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME} <= names


async def _status_of(call: object) -> tuple[grpc.aio.AioRpcError, object]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call  # type: ignore[misc]
    error = raised.value
    status = rpc_status.from_call(error)
    return error, status


def _unpacked(status: object, kind: type) -> list[object]:
    out = []
    for detail in status.details:  # type: ignore[attr-defined]
        if detail.Is(kind.DESCRIPTOR):  # type: ignore[attr-defined]
            message = kind()
            detail.Unpack(message)
            out.append(message)
    return out


async def test_bad_input_carries_bad_request_field_violations(admission: Client) -> None:
    request = pb.CreateServiceEnvironmentRequest(service_environment_name="bad name!")
    error, status = await _status_of(admission.quota.CreateServiceEnvironment(request))
    assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert status is not None and status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]  # type: ignore[attr-defined]
    (bad,) = _unpacked(status, error_details_pb2.BadRequest)
    (violation,) = bad.field_violations  # type: ignore[attr-defined]
    assert violation.field == "service_environment_name"
    assert violation.description
    (info,) = _unpacked(status, error_details_pb2.ErrorInfo)
    assert info.reason == "INVALID_ARGUMENT"  # type: ignore[attr-defined]
    assert info.metadata["field"] == "service_environment_name"  # type: ignore[attr-defined]


async def test_unknown_names_carry_resource_info(admission: Client) -> None:
    request = pb.DescribeServiceJobRequest(job_id="no-such-job")
    error, status = await _status_of(admission.jobs.DescribeServiceJob(request))
    assert error.code() is grpc.StatusCode.NOT_FOUND
    (resource,) = _unpacked(status, error_details_pb2.ResourceInfo)
    assert resource.resource_name == "job_id"  # type: ignore[attr-defined]


async def test_a_read_waiting_past_its_deadline_ends_with_deadline_exceeded(
    admission: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """A read asking for a log position nobody wrote waits on the read model; with a
    deadline shorter than the read timeout (10 s here) the server stops waiting when the
    deadline passes (it logs a deadline, not a lagging read model 10 s later)."""
    far_ahead = (await admission.log.last_seq()) + 1_000_000
    caplog.set_level(logging.INFO, logger="qm_admission.interceptors")
    call = admission.quota.DescribeServiceEnvironments(
        pb.DescribeServiceEnvironmentsRequest(),
        metadata=((MIN_SEQ_KEY, str(far_ahead)),),
        timeout=1.0,
    )
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    assert raised.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    for _ in range(50):  # the server's side ends with the deadline, give it 5 s to log
        if any("rpc deadline" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.1)
    messages = [r.getMessage() for r in caplog.records]
    assert any("rpc deadline method=/qm.v1.QuotaManagement/" in m for m in messages), messages
    assert not any("rpc unavailable" in m for m in messages), messages
