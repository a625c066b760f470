"""gRPC hygiene through the whole stack (TLS, every interceptor qm up installs): health
Watch streams, reflection v1 lists the services, a refusal carries google.rpc.Status."""

from __future__ import annotations

import grpc
from conftest import StackFactory, client_for
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from quartermaster.client import QuartermasterError
from quartermaster.client.credentials import find_credentials


def test_health_watch_reflection_and_rich_errors_on_qm_up(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=1)
    channel = find_credentials(credentials_dir=stack.credentials_dir).channel(stack.address)
    with channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(  # type: ignore[no-untyped-call]
            health_pb2.HealthCheckRequest(service=""), timeout=10
        )
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        reflect = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
            response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
        )
        (reply,) = reflect(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = {s.name for s in reply.list_services_response.service}
        assert {"qm.v1.ServiceJobs", "grpc.health.v1.Health"} <= names
    with client_for(stack) as c:
        try:
            c.create_service_environment("bad name!", {"ml.g5.xlarge": 1})
        except QuartermasterError as err:
            refused = err
        else:
            raise AssertionError("a bad name was accepted")
    assert refused.code is grpc.StatusCode.INVALID_ARGUMENT
    assert refused.field == "service_environment_name"
    assert refused.status is not None
    bad = error_details_pb2.BadRequest()
    assert any(d.Unpack(bad) for d in refused.status.details)
    assert bad.field_violations[0].field == "service_environment_name"
