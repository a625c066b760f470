"""The generated gRPC API modules import and expose every service and RPC."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor as _descriptor

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as pb_grpc

EXPECTED_RPCS: dict[str, set[str]] = {
    "QuotaManagement": {
        "CreateServiceEnvironment",
        "UpdateServiceEnvironment",
        "DescribeServiceEnvironments",
        "CreateSchedulingPolicy",
        "CreateJobQueue",
        "UpdateJobQueue",
        "DescribeJobQueues",
        "GetJobQueueSnapshot",
        "CreateQuotaShare",
        "UpdateQuotaShare",
        "DeleteQuotaShare",
        "DescribeQuotaShare",
        "ListQuotaShares",
        "DeleteServiceEnvironment",
        "UpdateSchedulingPolicy",
        "DescribeSchedulingPolicies",
        "ListSchedulingPolicies",
        "DeleteSchedulingPolicy",
        "DeleteJobQueue",
        "TagResource",
        "UntagResource",
        "ListTagsForResource",
    },
    "ServiceJobs": {
        "SubmitServiceJob",
        "SubmitServiceJobs",
        "UpdateServiceJob",
        "TerminateServiceJob",
        "DescribeServiceJob",
        "ListServiceJobs",
        "WatchServiceJobs",
        "ExplainServiceJob",
        "GetServiceJobLogs",
    },
    "WarmPools": {"ListWarmPools", "UpdateWarmPool"},
    "Nodes": {"ListNodes", "DrainNode", "UndrainNode"},
}

# RPCs whose response type is not <Rpc>Response.
RESPONSE_EXCEPTIONS = {"WatchServiceJobs": "JobStateChange", "GetServiceJobLogs": "LogChunk"}
STREAMING = {"WatchServiceJobs", "GetServiceJobLogs"}


def test_package_and_services() -> None:
    assert pb.DESCRIPTOR.package == "qm.v1"
    assert set(pb.DESCRIPTOR.services_by_name) == set(EXPECTED_RPCS)


@pytest.mark.parametrize("service_name", sorted(EXPECTED_RPCS))
def test_service_rpcs(service_name: str) -> None:
    service = pb.DESCRIPTOR.services_by_name[service_name]
    assert service.full_name == f"qm.v1.{service_name}"
    assert set(service.methods_by_name) == EXPECTED_RPCS[service_name]
    for method in service.methods:
        assert method.input_type.name == f"{method.name}Request"
        expected_out = RESPONSE_EXCEPTIONS.get(method.name, f"{method.name}Response")
        assert method.output_type.name == expected_out
        assert method.client_streaming is False
        assert method.server_streaming is (method.name in STREAMING)
    # The generated grpc module has a stub, a servicer and a registration helper.
    assert hasattr(pb_grpc, f"{service_name}Stub")
    assert hasattr(pb_grpc, f"{service_name}Servicer")
    assert hasattr(pb_grpc, f"add_{service_name}Servicer_to_server")


def test_enums_have_unspecified_zero_and_prefixed_values() -> None:
    for enum in pb.DESCRIPTOR.enum_types_by_name.values():
        prefix = "".join("_" + c if c.isupper() else c for c in enum.name).lstrip("_").upper()
        assert enum.values_by_number[0].name == f"{prefix}_UNSPECIFIED", enum.name
        for value in enum.values:
            assert value.name.startswith(prefix + "_"), value.name


def test_key_enum_values() -> None:
    assert pb.JobStatus.Value("JOB_STATUS_RUNNABLE") == pb.JOB_STATUS_RUNNABLE
    assert pb.SHARING_STRATEGY_LEND_AND_BORROW
    assert pb.WARM_POOL_STATUS_AVAILABLE
    assert pb.QUEUE_STATE_ENABLED
    statuses = [v.name for v in pb.JobStatus.DESCRIPTOR.values]
    assert statuses == [
        "JOB_STATUS_UNSPECIFIED",
        "JOB_STATUS_SUBMITTED",
        "JOB_STATUS_RUNNABLE",
        "JOB_STATUS_SCHEDULED",
        "JOB_STATUS_STARTING",
        "JOB_STATUS_RUNNING",
        "JOB_STATUS_SUCCEEDED",
        "JOB_STATUS_FAILED",
        "JOB_STATUS_PENDING",  # AWS's; appended, never held by a job
    ]


def test_optional_fields_track_presence() -> None:
    rsc = pb.ResourceSharingConfiguration(strategy=pb.SHARING_STRATEGY_LEND_AND_BORROW)
    assert not rsc.HasField("borrow_limit")  # unset means the default, -1
    rsc.borrow_limit = 0
    assert rsc.HasField("borrow_limit")

    pc = pb.ServiceJobPreemptionConfiguration()
    assert not pc.HasField("preemption_retries_before_termination")  # unlimited
    pc.preemption_retries_before_termination = 0
    assert pc.HasField("preemption_retries_before_termination")


def test_timestamps_are_int64() -> None:
    for message in pb.DESCRIPTOR.message_types_by_name.values():
        for field in message.fields:
            if field.name.endswith("_at") or field.name == "at":
                assert field.type == _descriptor.FieldDescriptor.TYPE_INT64, (
                    f"{message.name}.{field.name}"
                )


def test_submit_round_trip() -> None:
    req = pb.SubmitServiceJobRequest(
        job_name="train-1",
        job_queue="q",
        quota_share_name="qs1",
        service_job_type="SAGEMAKER_TRAINING",
        service_request_payload='{"ResourceConfig": {"InstanceType": "ml.g5.xlarge"}}',
        scheduling_priority=5,
        retry_strategy=pb.ServiceJobRetryStrategy(
            attempts=3,
            evaluate_on_exit=[
                pb.ServiceJobEvaluateOnExit(action=pb.RETRY_ACTION_RETRY, on_status_reason="*")
            ],
        ),
        timeout_config=pb.ServiceJobTimeout(attempt_duration_seconds=60),
        tags={"team": "ml"},
        client_token="tok",
    )
    batch = pb.SubmitServiceJobsRequest(jobs=[req])
    again = pb.SubmitServiceJobsRequest.FromString(batch.SerializeToString())
    assert again == batch
    result = pb.SubmitServiceJobResult(index=0, error=pb.ApiError(code="INVALID_ARGUMENT"))
    assert result.WhichOneof("outcome") == "error"
