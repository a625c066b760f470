"""Admission's request validation, pure: a request and a folded state in, events or a rejection out.

Every RPC that writes is checked for each bound of spec sections 1-2: the gRPC code
and the offending field. No servers; runs in milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from qm_admission import queries, validation
from qm_admission.errors import Code, RequestRejected
from qm_admission.names import Kind, arn
from qm_admission.tokens import request_hash
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State
from quartermaster.testing.builders import World, a_job

NOW = 2_000.0
UNIT = "ml.g5.xlarge"
MAX_KEEP_ALIVE = 3600

Request = Any
Validator = Callable[[Request, State], list[ev.Event]]

VALIDATORS: dict[type, Validator] = {
    pb.CreateServiceEnvironmentRequest: lambda r, s: validation.create_service_environment(
        r, s, at=NOW
    ),
    pb.UpdateServiceEnvironmentRequest: lambda r, s: validation.update_service_environment(
        r, s, at=NOW
    ),
    pb.CreateSchedulingPolicyRequest: lambda r, s: validation.create_scheduling_policy(
        r, s, at=NOW
    ),
    pb.CreateJobQueueRequest: lambda r, s: validation.create_job_queue(r, s, at=NOW),
    pb.UpdateJobQueueRequest: lambda r, s: validation.update_job_queue(r, s, at=NOW),
    pb.CreateQuotaShareRequest: lambda r, s: validation.create_quota_share(r, s, at=NOW),
    pb.UpdateQuotaShareRequest: lambda r, s: validation.update_quota_share(r, s, at=NOW),
    pb.DeleteQuotaShareRequest: lambda r, s: validation.delete_quota_share(r, s, at=NOW),
    pb.SubmitServiceJobRequest: lambda r, s: validation.submit_job(
        r, s, job_id="new-job", at=NOW, max_keep_alive_seconds=MAX_KEEP_ALIVE
    ),
    pb.UpdateServiceJobRequest: lambda r, s: validation.update_job(r, s, at=NOW),
    pb.TerminateServiceJobRequest: lambda r, s: validation.terminate_job(r, s, at=NOW),
    pb.UpdateWarmPoolRequest: lambda r, s: validation.update_warm_pool(
        r, s, at=NOW, max_keep_alive_seconds=MAX_KEEP_ALIVE
    ),
    pb.DrainNodeRequest: lambda r, s: validation.drain_node(r, s, at=NOW),
}


def validate(request: Request, state: State) -> list[ev.Event]:
    return VALIDATORS[type(request)](request, state)


# ---- the world the requests meet ------------------------------------------------------


def world() -> World:
    """env (2 x ml.g5.xlarge) serves queue q (shares QS1 L&B, QS2 LEND, QSoff DISABLED);
    env2 serves the DISABLED queue qoff; env3 serves nothing. Hosts h1 (healthy),
    h2 (lost). Jobs: `waiting` RUNNABLE in QS1, `done` FAILED (terminated) in QS2."""
    w = World()
    w.environment("env", ml_g5_xlarge=2)
    w.environment("env2", ml_g5_xlarge=1)
    w.environment("env3", ml_p4d_24xlarge=1)
    w.queue("q", "env")
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", 1, "LEND")
    w.apply(
        ev.QuotaShareCreated(
            at=w.clock,
            job_queue="q",
            name="QSoff",
            capacity_limits=(ev.CapacityLimit(UNIT, 1),),
            strategy=ev.SharingStrategy.RESERVE,
            state=ev.State.DISABLED,
        )
    )
    w.apply(
        ev.JobQueueCreated(
            at=w.clock,
            name="qoff",
            service_environment="env2",
            scheduling_policy="fifo",
            state=ev.State.DISABLED,
        )
    )
    w.share("S", 1, "RESERVE", queue="qoff")
    w.apply(ev.HostRegistered(at=w.clock, host_id="h1", instance_type=UNIT))
    w.apply(ev.HostRegistered(at=w.clock, host_id="h2", instance_type=UNIT))
    w.apply(ev.HostLost(at=w.clock, host_id="h2"))
    w.submit(a_job(name="waiting").in_share("QS1"), job_id="waiting")
    w.submit(a_job(name="done").in_share("QS2"), job_id="done")
    w.terminate("done")
    return w


@pytest.fixture
def state() -> State:
    return world().state


def payload(**overrides: Any) -> str:
    doc: dict[str, Any] = {"ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1}}
    doc.update(overrides)
    return json.dumps(doc)


def resources(**fields: Any) -> str:
    return payload(ResourceConfig={"InstanceType": UNIT, "InstanceCount": 1, **fields})


def channel(name: str = "train", uri: str = "s3://data/train/", **fields: Any) -> dict[str, Any]:
    """An InputDataConfig channel reading `uri` (S3DataSource; `S3=` fields go into it)."""
    source = {"S3Uri": uri, **fields.pop("S3", {})}
    return {"ChannelName": name, "DataSource": {"S3DataSource": source}, **fields}


def channels(*entries: dict[str, Any], **overrides: Any) -> str:
    return payload(InputDataConfig=list(entries), **overrides)


def limit(unit: str = UNIT, n: int = 1) -> pb.CapacityLimit:
    return pb.CapacityLimit(capacity_unit=unit, max_capacity=n)


def sharing(strategy: int, borrow_limit: int | None = None) -> pb.ResourceSharingConfiguration:
    return pb.ResourceSharingConfiguration(strategy=strategy, borrow_limit=borrow_limit)  # type: ignore[arg-type]


def order(environment: str, n: int = 1) -> pb.ServiceEnvironmentOrder:
    return pb.ServiceEnvironmentOrder(order=n, service_environment=environment)


# Valid requests (against `world()`), changed by keyword.


def env(**kw: Any) -> pb.CreateServiceEnvironmentRequest:
    return pb.CreateServiceEnvironmentRequest(
        **{"service_environment_name": "e", "capacity_limits": [limit()], **kw}
    )


def env_update(**kw: Any) -> pb.UpdateServiceEnvironmentRequest:
    return pb.UpdateServiceEnvironmentRequest(**{"service_environment": "env", **kw})


def policy(**kw: Any) -> pb.CreateSchedulingPolicyRequest:
    return pb.CreateSchedulingPolicyRequest(**{"name": "p", **kw})


def queue(**kw: Any) -> pb.CreateJobQueueRequest:
    return pb.CreateJobQueueRequest(
        **{
            "job_queue_name": "q9",
            "scheduling_policy_arn": "fifo",
            "service_environment_order": [order("env3")],
            **kw,
        }
    )


def queue_update(**kw: Any) -> pb.UpdateJobQueueRequest:
    return pb.UpdateJobQueueRequest(**{"job_queue": "q", **kw})


def share(**kw: Any) -> pb.CreateQuotaShareRequest:
    return pb.CreateQuotaShareRequest(
        **{
            "job_queue": "q",
            "quota_share_name": "QS9",
            "capacity_limits": [limit()],
            "resource_sharing_configuration": sharing(pb.SHARING_STRATEGY_LEND),
            **kw,
        }
    )


def share_update(**kw: Any) -> pb.UpdateQuotaShareRequest:
    return pb.UpdateQuotaShareRequest(**{"job_queue": "q", "quota_share_name": "QS1", **kw})


def share_delete(**kw: Any) -> pb.DeleteQuotaShareRequest:
    return pb.DeleteQuotaShareRequest(**{"job_queue": "q", "quota_share_name": "QSoff", **kw})


def submit(**kw: Any) -> pb.SubmitServiceJobRequest:
    return pb.SubmitServiceJobRequest(
        **{
            "job_name": "train",
            "job_queue": "q",
            "quota_share_name": "QS1",
            "service_request_payload": payload(),
            **kw,
        }
    )


def retry(attempts: int = 1, *rules: pb.ServiceJobEvaluateOnExit) -> pb.ServiceJobRetryStrategy:
    return pb.ServiceJobRetryStrategy(attempts=attempts, evaluate_on_exit=rules)


def job_update(**kw: Any) -> pb.UpdateServiceJobRequest:
    return pb.UpdateServiceJobRequest(**{"job_id": "waiting", **kw})


def terminate(**kw: Any) -> pb.TerminateServiceJobRequest:
    return pb.TerminateServiceJobRequest(**{"job_id": "waiting", "reason": "stop", **kw})


def keep_alive(**kw: Any) -> pb.UpdateWarmPoolRequest:
    return pb.UpdateWarmPoolRequest(
        **{"job_id": "waiting", "keep_alive_period_in_seconds": 60, **kw}
    )


def drain(**kw: Any) -> pb.DrainNodeRequest:
    return pb.DrainNodeRequest(**{"host_id": "h1", **kw})


INVALID, NOT_FOUND, EXISTS, PRECONDITION = (
    Code.INVALID_ARGUMENT,
    Code.NOT_FOUND,
    Code.ALREADY_EXISTS,
    Code.FAILED_PRECONDITION,
)
P = "service_request_payload"
RC = f"{P}.ResourceConfig"
BL = "resource_sharing_configuration.borrow_limit"
SEO = "service_environment_order"
EXIT = pb.ServiceJobEvaluateOnExit(action=pb.RETRY_ACTION_EXIT)
LEND, LAB, RESERVE = (
    pb.SHARING_STRATEGY_LEND,
    pb.SHARING_STRATEGY_LEND_AND_BORROW,
    pb.SHARING_STRATEGY_RESERVE,
)
IDC = f"{P}.InputDataConfig"
S3DS = f"{IDC}[0].DataSource.S3DataSource"
case = pytest.param

# fmt: off
REJECTED = [
    # CreateServiceEnvironment
    case(env(service_environment_name=""), INVALID, "service_environment_name", id="env-empty"),
    case(env(service_environment_name="a b"), INVALID, "service_environment_name", id="env-chars"),
    case(env(service_environment_name="e" * 129), INVALID, "service_environment_name",
         id="env-129"),
    case(env(capacity_limits=[]), INVALID, "capacity_limits", id="env-no-limits"),
    case(env(capacity_limits=[limit(f"ml.t{i}") for i in range(6)]), INVALID, "capacity_limits",
         id="env-6-limits"),
    case(env(capacity_limits=[limit(n=0)]), INVALID, "capacity_limits[0].max_capacity",
         id="env-max-0"),
    case(env(capacity_limits=[limit(), limit()]), INVALID, "capacity_limits[1].capacity_unit",
         id="env-unit-twice"),
    case(env(capacity_limits=[limit("")]), INVALID, "capacity_limits[0].capacity_unit",
         id="env-empty-unit"),
    case(env(state=7), INVALID, "state", id="env-unknown-state"),
    case(env(service_environment_name="env"), EXISTS, "service_environment_name", id="env-exists"),
    # UpdateServiceEnvironment
    case(env_update(service_environment="nope"), NOT_FOUND, "service_environment",
         id="env-update-unknown"),
    case(env_update(service_environment=""), INVALID, "service_environment",
         id="env-update-missing"),
    case(env_update(service_environment=arn(Kind.JOB_QUEUE, "env")), INVALID,
         "service_environment", id="env-update-queue-arn"),
    case(env_update(capacity_limits=[limit(n=0)]), INVALID, "capacity_limits[0].max_capacity",
         id="env-update-max-0"),
    # CreateSchedulingPolicy
    case(policy(name="x/y"), INVALID, "name", id="policy-name"),
    case(policy(name="fifo"), EXISTS, "name", id="policy-exists"),
    case(policy(quota_share_policy={"idle_resource_assignment_strategy": 5}),
         INVALID, "quota_share_policy.idle_resource_assignment_strategy", id="policy-not-fifo"),
    # CreateJobQueue
    case(queue(job_queue_name=""), INVALID, "job_queue_name", id="queue-name"),
    case(queue(scheduling_policy_arn=""), INVALID, "scheduling_policy_arn", id="queue-no-policy"),
    case(queue(scheduling_policy_arn="nope"), NOT_FOUND, "scheduling_policy_arn",
         id="queue-unknown-policy"),
    case(queue(service_environment_order=[]), INVALID, SEO, id="queue-no-environment"),
    case(queue(service_environment_order=[order("env3"), order("env3", 2)]), INVALID, SEO,
         id="queue-two-environments"),
    case(queue(service_environment_order=[order("nope")]), NOT_FOUND,
         f"{SEO}[0].service_environment", id="queue-unknown-environment"),
    case(queue(service_environment_order=[order("env")]), PRECONDITION,
         f"{SEO}[0].service_environment", id="queue-environment-taken"),
    case(queue(job_queue_name="q"), EXISTS, "job_queue_name", id="queue-exists"),
    # UpdateJobQueue
    case(queue_update(job_queue="nope"), NOT_FOUND, "job_queue", id="queue-update-unknown"),
    case(queue_update(scheduling_policy_arn="nope"), NOT_FOUND, "scheduling_policy_arn",
         id="queue-update-unknown-policy"),
    case(queue_update(state=3), INVALID, "state", id="queue-update-unknown-state"),
    # CreateQuotaShare
    case(share(job_queue="nope"), NOT_FOUND, "job_queue", id="share-unknown-queue"),
    case(share(quota_share_name="a.b"), INVALID, "quota_share_name", id="share-name"),
    case(share(capacity_limits=[]), INVALID, "capacity_limits", id="share-no-limits"),
    case(share(capacity_limits=[limit("ml.p4d.24xlarge")]), INVALID,
         "capacity_limits[0].capacity_unit", id="share-unit-not-in-environment"),
    case(share(capacity_limits=[limit(n=0)]), INVALID, "capacity_limits[0].max_capacity",
         id="share-max-0"),
    case(share(resource_sharing_configuration=None), INVALID,
         "resource_sharing_configuration.strategy", id="share-no-strategy"),
    case(share(resource_sharing_configuration=sharing(LEND, 100)), INVALID, BL,
         id="share-borrow-limit-on-lend"),
    case(share(resource_sharing_configuration=sharing(RESERVE, 0)), INVALID, BL,
         id="share-borrow-limit-on-reserve"),
    case(share(resource_sharing_configuration=sharing(LAB, -2)), INVALID, BL,
         id="share-borrow-limit-minus-2"),
    case(share(preemption_configuration={"in_share_preemption": 4}), INVALID,
         "preemption_configuration.in_share_preemption", id="share-unknown-preemption"),
    case(share(quota_share_name="QS1"), EXISTS, "quota_share_name", id="share-exists"),
    # UpdateQuotaShare
    case(share_update(job_queue="nope"), NOT_FOUND, "job_queue", id="share-update-unknown-queue"),
    case(share_update(quota_share_name="nope"), NOT_FOUND, "quota_share_name",
         id="share-update-unknown"),
    case(share_update(quota_share_name=""), INVALID, "quota_share_name", id="share-update-no-name"),
    case(share_update(quota_share_name="QS2", resource_sharing_configuration=sharing(0, 50)),
         INVALID, BL, id="share-update-borrow-limit-on-lend"),
    case(share_update(capacity_limits=[limit(n=0)]), INVALID, "capacity_limits[0].max_capacity",
         id="share-update-max-0"),
    # DeleteQuotaShare
    case(share_delete(quota_share_name="x"), NOT_FOUND, "quota_share_name",
         id="share-delete-unknown"),
    case(share_delete(quota_share_name="QS1"), PRECONDITION, "quota_share_name",
         id="share-delete-enabled"),
    # SubmitServiceJob
    case(submit(job_name=""), INVALID, "job_name", id="submit-empty-name"),
    case(submit(job_name="my job"), INVALID, "job_name", id="submit-name-chars"),
    case(submit(job_queue=""), INVALID, "job_queue", id="submit-no-queue"),
    case(submit(job_queue="nope"), NOT_FOUND, "job_queue", id="submit-unknown-queue"),
    case(submit(quota_share_name=""), INVALID, "quota_share_name", id="submit-no-share"),
    case(submit(quota_share_name="nope"), NOT_FOUND, "quota_share_name",
         id="submit-unknown-share"),
    case(submit(service_job_type="BATCH"), INVALID, "service_job_type", id="submit-job-type"),
    case(submit(scheduling_priority=-1), INVALID, "scheduling_priority", id="submit-priority--1"),
    case(submit(scheduling_priority=10000), INVALID, "scheduling_priority",
         id="submit-priority-10000"),
    case(submit(retry_strategy=retry(11)), INVALID, "retry_strategy.attempts",
         id="submit-11-attempts"),
    case(submit(retry_strategy=retry(-1)), INVALID, "retry_strategy.attempts",
         id="submit-minus-1-attempts"),
    case(submit(retry_strategy=retry(2, *[EXIT] * 6)), INVALID, "retry_strategy.evaluate_on_exit",
         id="submit-6-exit-rules"),
    case(submit(retry_strategy=retry(2, pb.ServiceJobEvaluateOnExit(on_status_reason="*"))),
         INVALID, "retry_strategy.evaluate_on_exit[0].action", id="submit-rule-without-action"),
    case(submit(preemption_configuration={"preemption_retries_before_termination": -1}),
         INVALID, "preemption_configuration.preemption_retries_before_termination",
         id="submit-preemption-retries--1"),
    case(submit(timeout_config={"attempt_duration_seconds": -1}), INVALID,
         "timeout_config.attempt_duration_seconds", id="submit-attempt-duration--1"),
    case(submit(tags={f"k{i}": "v" for i in range(51)}), INVALID, "tags", id="submit-51-tags"),
    case(submit(tags={"": "v"}), INVALID, "tags", id="submit-empty-tag-key"),
    case(submit(client_token="t" * 65), INVALID, "client_token", id="submit-token-65"),
    case(submit(client_token="a\nb"), INVALID, "client_token", id="submit-token-newline"),
    case(submit(service_request_payload=""), INVALID, P, id="submit-no-payload"),
    case(submit(service_request_payload="{"), INVALID, P, id="submit-payload-not-json"),
    case(submit(service_request_payload="[]"), INVALID, P, id="submit-payload-a-list"),
    case(submit(service_request_payload=payload(Env={"X": "x" * 300_000})), INVALID, P,
         id="submit-payload-too-large"),
    case(submit(service_request_payload="{}"), INVALID, RC, id="submit-no-resource-config"),
    case(submit(service_request_payload=payload(ResourceConfig="big")), INVALID, RC,
         id="submit-resource-config-a-string"),
    case(submit(service_request_payload=payload(ResourceConfig={"InstanceCount": 1})), INVALID,
         f"{RC}.InstanceType", id="submit-no-instance-type"),
    case(submit(service_request_payload=payload(ResourceConfig={"InstanceType": UNIT})), INVALID,
         f"{RC}.InstanceCount", id="submit-no-instance-count"),
    case(submit(service_request_payload=resources(InstanceCount=0)), INVALID,
         f"{RC}.InstanceCount", id="submit-instance-count-0"),
    case(submit(service_request_payload=resources(InstanceCount="2")), INVALID,
         f"{RC}.InstanceCount", id="submit-instance-count-text"),
    case(submit(service_request_payload=resources(InstanceCount=True)), INVALID,
         f"{RC}.InstanceCount", id="submit-instance-count-bool"),
    case(submit(service_request_payload=resources(KeepAlivePeriodInSeconds=MAX_KEEP_ALIVE + 1)),
         INVALID, f"{RC}.KeepAlivePeriodInSeconds", id="submit-keep-alive-past-max"),
    case(submit(service_request_payload=resources(KeepAlivePeriodInSeconds=-1)), INVALID,
         f"{RC}.KeepAlivePeriodInSeconds", id="submit-keep-alive--1"),
    case(submit(service_request_payload=resources(VolumeSizeInGB="x")), INVALID,
         f"{RC}.VolumeSizeInGB", id="submit-volume-size-text"),
    case(submit(service_request_payload=payload(StoppingCondition={"MaxRuntimeInSeconds": 0})),
         INVALID, f"{P}.StoppingCondition.MaxRuntimeInSeconds", id="submit-max-runtime-0"),
    case(submit(service_request_payload=payload(VpcConfig={"Subnets": "s1"})), INVALID,
         f"{P}.VpcConfig.Subnets", id="submit-subnets-not-a-list"),
    case(submit(service_request_payload=payload(EnableNetworkIsolation="yes")), INVALID,
         f"{P}.EnableNetworkIsolation", id="submit-isolation-text"),
    case(submit(service_request_payload=payload(RoleArn=7)), INVALID, f"{P}.RoleArn",
         id="submit-role-a-number"),
    # SubmitServiceJob: where the training data comes from and goes
    case(submit(service_request_payload=payload(InputDataConfig=channel())), INVALID, IDC,
         id="submit-channels-not-a-list"),
    case(submit(service_request_payload=payload(InputDataConfig=["train"])), INVALID,
         f"{IDC}[0]", id="submit-channel-a-string"),
    case(submit(service_request_payload=channels({"DataSource": {}})), INVALID,
         f"{IDC}[0].ChannelName", id="submit-channel-without-name"),
    case(submit(service_request_payload=channels(channel("tr ain"))), INVALID,
         f"{IDC}[0].ChannelName", id="submit-channel-name-space"),
    case(submit(service_request_payload=channels(channel("c" * 65))), INVALID,
         f"{IDC}[0].ChannelName", id="submit-channel-name-65"),
    case(submit(service_request_payload=channels(channel(".."))), INVALID,
         f"{IDC}[0].ChannelName", id="submit-channel-name-dotdot"),
    case(submit(service_request_payload=channels(channel(), channel("eval"), channel())),
         INVALID, f"{IDC}[2].ChannelName", id="submit-channel-twice"),
    case(submit(service_request_payload=channels(channel(InputMode="Pipe"))), INVALID,
         f"{IDC}[0].InputMode", id="submit-channel-pipe-mode"),
    case(submit(service_request_payload=channels(channel(InputMode="Stream"))), INVALID,
         f"{IDC}[0].InputMode", id="submit-channel-unknown-mode"),
    case(submit(service_request_payload=payload(
        AlgorithmSpecification={"TrainingInputMode": "Pipe"})), INVALID,
         f"{P}.AlgorithmSpecification.TrainingInputMode", id="submit-job-pipe-mode"),
    case(submit(service_request_payload=channels(channel(ContentType=5))), INVALID,
         f"{IDC}[0].ContentType", id="submit-channel-content-type-number"),
    case(submit(service_request_payload=channels({"ChannelName": "train"})), INVALID,
         f"{IDC}[0].DataSource", id="submit-channel-without-source"),
    case(submit(service_request_payload=channels({"ChannelName": "train", "DataSource": {
        "S3DataSource": {"S3Uri": "s3://data/x"},
        "FileSystemDataSource": {"DirectoryPath": "/data"}}})), INVALID,
         f"{IDC}[0].DataSource", id="submit-channel-two-sources"),
    case(submit(service_request_payload=channels(channel(uri=""))), INVALID, f"{S3DS}.S3Uri",
         id="submit-channel-no-uri"),
    case(submit(service_request_payload=channels(channel(uri="s3://Data_Bucket/x"))), INVALID,
         f"{S3DS}.S3Uri", id="submit-channel-bad-bucket"),
    case(submit(service_request_payload=channels(channel(uri="https://data/x"))), INVALID,
         f"{S3DS}.S3Uri", id="submit-channel-http-uri"),
    case(submit(service_request_payload=channels(channel(uri="data/train"))), INVALID,
         f"{S3DS}.S3Uri", id="submit-channel-relative-path"),
    case(submit(service_request_payload=channels(channel(uri="file://other/data"))), INVALID,
         f"{S3DS}.S3Uri", id="submit-channel-file-uri-of-another-host"),
    case(submit(service_request_payload=channels(channel(uri="file://[x/data"))), INVALID,
         f"{S3DS}.S3Uri", id="submit-channel-file-uri-unparsable"),
    case(submit(service_request_payload=channels(channel(S3={"S3DataType":
        "AugmentedManifestFile"}))), INVALID, f"{S3DS}.S3DataType",
         id="submit-channel-augmented-manifest"),
    case(submit(service_request_payload=channels(channel(S3={"S3DistributionType": "Random"}))),
         INVALID, f"{S3DS}.S3DistributionType", id="submit-channel-unknown-distribution"),
    case(submit(service_request_payload=channels({"ChannelName": "train", "DataSource": {
        "FileSystemDataSource": {"DirectoryPath": "data/train"}}})), INVALID,
         f"{IDC}[0].DataSource.FileSystemDataSource.DirectoryPath",
         id="submit-channel-relative-directory"),
    case(submit(service_request_payload=payload(OutputDataConfig="s3://out/")), INVALID,
         f"{P}.OutputDataConfig", id="submit-output-a-string"),
    case(submit(service_request_payload=payload(OutputDataConfig={"S3OutputPath": "/out"})),
         INVALID, f"{P}.OutputDataConfig.S3OutputPath", id="submit-output-local"),
    case(submit(service_request_payload=payload(OutputDataConfig={"S3OutputPath": "s3://o"})),
         INVALID, f"{P}.OutputDataConfig.S3OutputPath", id="submit-output-bad-bucket"),
    case(submit(service_request_payload=payload(CheckpointConfig={"LocalPath": "/ckpt"})),
         INVALID, f"{P}.CheckpointConfig.S3Uri", id="submit-checkpoint-without-uri"),
    case(submit(service_request_payload=payload(CheckpointConfig={"S3Uri": "ckpt/"})),
         INVALID, f"{P}.CheckpointConfig.S3Uri", id="submit-checkpoint-not-s3"),
    case(submit(service_request_payload=payload(CheckpointConfig={
        "S3Uri": "s3://ckpt/a/", "LocalPath": "ckpt"})), INVALID,
         f"{P}.CheckpointConfig.LocalPath", id="submit-checkpoint-relative-local-path"),
    case(submit(service_request_payload=payload(CheckpointConfig={
        "S3Uri": "s3://ckpt/a/", "LocalPath": "/opt/ml/../../etc"})), INVALID,
         f"{P}.CheckpointConfig.LocalPath", id="submit-checkpoint-local-path-dotdot"),
    case(submit(service_request_payload=payload(CheckpointConfig={
        "S3Uri": "s3://ckpt/a/", "LocalPath": "/tmp/ckpt"})), INVALID,
         f"{P}.CheckpointConfig.LocalPath", id="submit-checkpoint-local-path-outside-opt-ml"),
    case(submit(service_request_payload=payload(CheckpointConfig={
        "S3Uri": "s3://ckpt/a/", "LocalPath": "/opt/ml"})), INVALID,
         f"{P}.CheckpointConfig.LocalPath", id="submit-checkpoint-local-path-opt-ml-itself"),
    case(submit(service_request_payload=payload(HyperParameters=["lr=1"])), INVALID,
         f"{P}.HyperParameters", id="submit-hyperparameters-a-list"),
    case(submit(service_request_payload=payload(HyperParameters={"epochs": "3", "lr": 0.1})),
         INVALID, f"{P}.HyperParameters.lr", id="submit-hyperparameter-a-number"),
    case(submit(service_request_payload=payload(HyperParameters={"learning rate": None})),
         INVALID, f'{P}.HyperParameters["learning rate"]', id="submit-hyperparameter-null"),
    case(submit(service_request_payload=resources(InstanceType="ml.p4d.24xlarge")), INVALID,
         f"{RC}.InstanceType", id="submit-type-not-in-environment"),
    case(submit(job_queue="qoff", quota_share_name="S"), PRECONDITION, "job_queue",
         id="submit-queue-disabled"),
    case(submit(quota_share_name="QSoff"), PRECONDITION, "quota_share_name",
         id="submit-share-disabled"),
    # UpdateServiceJob
    case(job_update(job_id=""), INVALID, "job_id", id="update-no-job"),
    case(job_update(job_id="nope"), NOT_FOUND, "job_id", id="update-unknown-job"),
    case(job_update(scheduling_priority=10000), INVALID, "scheduling_priority",
         id="update-priority-10000"),
    case(job_update(job_id="done"), PRECONDITION, "job_id", id="update-finished-job"),
    # TerminateServiceJob
    case(terminate(job_id="nope"), NOT_FOUND, "job_id", id="terminate-unknown-job"),
    case(terminate(reason=""), INVALID, "reason", id="terminate-no-reason"),
    case(terminate(job_id="done"), PRECONDITION, "job_id", id="terminate-finished-job"),
    # UpdateWarmPool
    case(keep_alive(job_id="nope"), NOT_FOUND, "job_id", id="pool-unknown-job"),
    case(keep_alive(keep_alive_period_in_seconds=-1), INVALID, "keep_alive_period_in_seconds",
         id="pool-keep-alive--1"),
    case(keep_alive(keep_alive_period_in_seconds=MAX_KEEP_ALIVE + 1), INVALID,
         "keep_alive_period_in_seconds", id="pool-keep-alive-past-max"),
    case(keep_alive(job_id="done"), PRECONDITION, "job_id", id="pool-finished-job-without-pool"),
    # DrainNode
    case(drain(host_id=""), INVALID, "host_id", id="drain-no-host"),
    case(drain(host_id="nope"), NOT_FOUND, "host_id", id="drain-unknown-host"),
    case(drain(host_id="h2"), PRECONDITION, "host_id", id="drain-lost-host"),
]
# fmt: on


@pytest.mark.parametrize(("request_", "code", "field"), REJECTED)
def test_an_invalid_request_is_rejected_with_its_code_and_field(
    state: State, request_: Request, code: Code, field: str
) -> None:
    with pytest.raises(RequestRejected) as rejected:
        validate(request_, state)

    assert (rejected.value.code, rejected.value.field) == (code, field), rejected.value.message


def test_a_pipe_mode_refusal_says_which_modes_work(state: State) -> None:
    request = submit(service_request_payload=channels(channel(InputMode="Pipe")))

    with pytest.raises(RequestRejected) as rejected:
        validate(request, state)

    assert rejected.value.message == "Pipe mode is not supported; use File or FastFile"


def test_an_s3_uri_refusal_says_what_is_wrong_with_it(state: State) -> None:
    request = submit(service_request_payload=channels(channel(uri="s3://Data_Bucket/x")))

    with pytest.raises(RequestRejected) as rejected:
        validate(request, state)

    assert "bucket 'Data_Bucket' is not a valid S3 bucket name" in rejected.value.message


def test_s3_and_local_channels_outputs_and_checkpoints_are_accepted(state: State) -> None:
    local_dir = {"FileSystemDataSource": {"DirectoryPath": "/srv/data/eval"}}
    request = submit(
        service_request_payload=channels(
            channel(
                "train", S3={"S3DataType": "S3Prefix", "S3DistributionType": "FullyReplicated"}
            ),
            channel(
                "manifest",
                "s3://data/train.manifest",
                InputMode="FastFile",
                S3={"S3DataType": "ManifestFile", "S3DistributionType": "ShardedByS3Key"},
            ),
            channel("local", "/srv/data/train", InputMode="File", ContentType="text/csv"),
            channel("file-uri", "file:///srv/data/test"),
            channel("localhost.uri_1", "file://localhost/srv/data/x"),
            {"ChannelName": "eval", "DataSource": local_dir},
            AlgorithmSpecification={"TrainingInputMode": "FastFile"},
            OutputDataConfig={"S3OutputPath": "s3://models/out/"},
            CheckpointConfig={"S3Uri": "s3://ckpt/run-1/", "LocalPath": "/opt/ml/checkpoints"},
            HyperParameters={"epochs": "3", "learning rate": "0.1"},
        )
    )

    (event,) = validate(request, state)

    assert isinstance(event, ev.JobSubmitted)
    assert event.payload == request.service_request_payload  # kept as given


def submit_with_roles(request: Request, state: State, roles: frozenset[str] | None) -> Any:
    return validation.submit_job(
        request,
        state,
        job_id="new-job",
        at=NOW,
        max_keep_alive_seconds=MAX_KEEP_ALIVE,
        known_roles=roles,
    )


ROLE = "arn:aws:iam::000000000000:role/quartermaster"
OTHER_ROLE = "arn:aws:iam::000000000000:role/other"


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param({"RoleArn": OTHER_ROLE}, id="unknown-role"),
        pytest.param({"InputDataConfig": [channel()]}, id="s3-channel-without-role"),
        pytest.param(
            {"OutputDataConfig": {"S3OutputPath": "s3://models/"}}, id="s3-output-without-role"
        ),
        pytest.param(
            {"CheckpointConfig": {"S3Uri": "s3://ckpt/a/"}}, id="s3-checkpoint-without-role"
        ),
    ],
)
def test_with_a_roles_file_a_job_needs_one_of_its_roles(state: State, doc: dict[str, Any]) -> None:
    request = submit(service_request_payload=payload(**doc))

    with pytest.raises(RequestRejected) as rejected:
        submit_with_roles(request, state, frozenset({ROLE}))

    assert (rejected.value.code, rejected.value.field) == (INVALID, f"{P}.RoleArn")
    if "RoleArn" in doc:
        assert OTHER_ROLE in rejected.value.message


@pytest.mark.parametrize(
    ("doc", "roles"),
    [
        pytest.param(
            {"RoleArn": ROLE, "InputDataConfig": [channel()]}, frozenset({ROLE}), id="known-role"
        ),
        pytest.param(
            {"InputDataConfig": [channel(uri="/srv/data")]},
            frozenset({ROLE}),
            id="local-channel-without-role",
        ),
        pytest.param({}, frozenset({ROLE}), id="no-data-no-role"),
        pytest.param(
            {"RoleArn": OTHER_ROLE, "InputDataConfig": [channel()]},
            None,
            id="no-roles-file-any-role",
        ),
        pytest.param({"InputDataConfig": [channel()]}, None, id="no-roles-file-no-role"),
    ],
)
def test_a_role_the_stack_knows_or_no_roles_file_is_accepted(
    state: State, doc: dict[str, Any], roles: frozenset[str] | None
) -> None:
    (event,) = submit_with_roles(submit(service_request_payload=payload(**doc)), state, roles)

    assert isinstance(event, ev.JobSubmitted)


def test_every_writing_rpc_has_rejection_cases() -> None:
    covered = {type(param.values[0]) for param in REJECTED}
    assert covered == set(VALIDATORS)


def test_a_queue_takes_twenty_shares_and_refuses_the_twenty_first() -> None:
    w = world()  # QS1, QS2 and QSoff exist
    for i in range(16):
        w.share(f"S{i}", 1, "LEND")
    assert validate(share(quota_share_name="twentieth"), w.state)
    w.share("twentieth", 1, "LEND")

    with pytest.raises(RequestRejected) as rejected:
        validate(share(quota_share_name="twenty-first"), w.state)

    assert (rejected.value.code, rejected.value.field) == (PRECONDITION, "job_queue")


# ---- what valid requests write ----------------------------------------------------------


def test_a_submission_carries_limits_retries_and_the_warm_pool_key(state: State) -> None:
    request = submit(
        job_name="train-1",
        job_queue=arn(Kind.JOB_QUEUE, "q"),
        scheduling_priority=7,
        retry_strategy=pb.ServiceJobRetryStrategy(
            attempts=3,
            evaluate_on_exit=[
                pb.ServiceJobEvaluateOnExit(action=pb.RETRY_ACTION_EXIT, on_exit_code="137"),
                pb.ServiceJobEvaluateOnExit(action=pb.RETRY_ACTION_RETRY, on_status_reason="*"),
            ],
        ),
        preemption_configuration=pb.ServiceJobPreemptionConfiguration(
            preemption_retries_before_termination=0
        ),
        timeout_config=pb.ServiceJobTimeout(attempt_duration_seconds=600),
        tags={"team": "vision"},
        client_token="tok-1",
        service_request_payload=json.dumps(
            {
                "RoleArn": "arn:aws:iam::1:role/r",
                "ResourceConfig": {
                    "InstanceType": UNIT,
                    "InstanceCount": 2,
                    "VolumeSizeInGB": 50,
                    "VolumeKmsKeyId": "kms-1",
                    "KeepAlivePeriodInSeconds": 900,
                },
                "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
                "VpcConfig": {"SecurityGroupIds": ["sg-b", "sg-a"], "Subnets": ["s2", "s1"]},
                "EnableNetworkIsolation": True,
                "EnableInterContainerTrafficEncryption": True,
                "SessionChainingConfig": {"EnableSessionTagChaining": True},
                "Tags": [{"Key": "b", "Value": "1"}, {"Key": "a", "Value": "2"}],
                "AlgorithmSpecification": {"TrainingImage": "img:1"},
            }
        ),
    )

    (event,) = validate(request, state)

    assert isinstance(event, ev.JobSubmitted)
    assert event.job_id == "new-job" and event.at == NOW
    assert (event.job_name, event.job_queue, event.quota_share) == ("train-1", "q", "QS1")
    assert (event.instance_type, event.instance_count) == (UNIT, 2)
    assert event.scheduling_priority == 7
    assert event.retry_attempts == 3
    assert event.evaluate_on_exit == (
        ev.EvaluateOnExit(action="EXIT", on_exit_code="137"),
        ev.EvaluateOnExit(action="RETRY", on_status_reason="*"),
    )
    assert event.preemption_retries == 0
    assert event.attempt_duration_seconds == 600
    assert event.max_runtime_seconds == 3600
    assert event.keep_alive_seconds == 900
    assert event.tags == {"team": "vision"}
    assert event.client_token == "tok-1"
    assert event.payload == request.service_request_payload
    assert event.warm_pool_key == ev.WarmPoolKey(
        role_arn="arn:aws:iam::1:role/r",
        instance_type=UNIT,
        instance_count=2,
        volume_kms_key_id="kms-1",
        volume_size_in_gb=50,
        security_group_ids=("sg-a", "sg-b"),
        subnets=("s1", "s2"),
        inter_container_traffic_encryption=True,
        network_isolation=True,
        session_tag_chaining=True,
        session_tag_keys=("a", "b"),
    )


def test_a_minimal_submission_gets_the_defaults(state: State) -> None:
    (event,) = validate(submit(), state)

    assert isinstance(event, ev.JobSubmitted)
    assert event.retry_attempts == 1
    assert event.evaluate_on_exit == ()
    assert event.preemption_retries is None  # unset = unlimited
    assert event.attempt_duration_seconds is None
    assert event.max_runtime_seconds is None
    assert event.keep_alive_seconds == 0
    assert event.client_token is None
    assert event.service_job_type == "SAGEMAKER_TRAINING"
    assert event.warm_pool_key == ev.WarmPoolKey(instance_type=UNIT, instance_count=1)


def test_jobs_with_the_same_pool_inputs_get_equal_keys_whatever_the_order(state: State) -> None:
    one = submit(service_request_payload=payload(VpcConfig={"Subnets": ["a", "b"]}, Image="x"))
    two = submit(service_request_payload=payload(VpcConfig={"Subnets": ["b", "a"]}, Image="y"))

    (first,), (second,) = validate(one, state), validate(two, state)

    assert isinstance(first, ev.JobSubmitted) and isinstance(second, ev.JobSubmitted)
    assert first.warm_pool_key == second.warm_pool_key


def test_configuration_requests_write_their_events(state: State) -> None:
    assert validate(
        pb.CreateServiceEnvironmentRequest(
            service_environment_name="env9", capacity_limits=[limit(n=3)]
        ),
        state,
    ) == [
        ev.ServiceEnvironmentCreated(
            at=NOW, name="env9", capacity_limits=(ev.CapacityLimit(UNIT, 3),)
        )
    ]
    assert validate(queue(), state) == [
        ev.JobQueueCreated(at=NOW, name="q9", service_environment="env3", scheduling_policy="fifo")
    ]
    assert validate(
        share(
            quota_share_name="QS9",
            resource_sharing_configuration=sharing(pb.SHARING_STRATEGY_LEND_AND_BORROW, 200),
            preemption_configuration=pb.QuotaSharePreemptionConfiguration(
                in_share_preemption=pb.IN_SHARE_PREEMPTION_ENABLED
            ),
        ),
        state,
    ) == [
        ev.QuotaShareCreated(
            at=NOW,
            job_queue="q",
            name="QS9",
            capacity_limits=(ev.CapacityLimit(UNIT, 1),),
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
            borrow_limit=200,
            in_share_preemption=ev.State.ENABLED,
        )
    ]


def test_a_share_update_changes_only_what_it_sets(state: State) -> None:
    (event,) = validate(
        pb.UpdateQuotaShareRequest(
            job_queue="q", quota_share_name="QS1", state=pb.QUOTA_SHARE_STATE_DISABLED
        ),
        state,
    )

    assert event == ev.QuotaShareUpdated(
        at=NOW,
        job_queue="q",
        name="QS1",
        capacity_limits=(ev.CapacityLimit(UNIT, 1),),
        strategy=ev.SharingStrategy.LEND_AND_BORROW,
        borrow_limit=-1,
        state=ev.State.DISABLED,
    )


def test_a_share_that_stops_borrowing_drops_its_borrow_limit() -> None:
    w = world()
    w.share("QS1", 1, "LEND_AND_BORROW", borrow_limit=100, updated=True)

    (event,) = validate(
        pb.UpdateQuotaShareRequest(
            job_queue="q",
            quota_share_name="QS1",
            resource_sharing_configuration=sharing(pb.SHARING_STRATEGY_RESERVE),
        ),
        w.state,
    )

    assert isinstance(event, ev.QuotaShareUpdated)
    assert (event.strategy, event.borrow_limit) == (ev.SharingStrategy.RESERVE, -1)


def test_a_share_without_jobs_can_be_deleted(state: State) -> None:
    assert validate(pb.DeleteQuotaShareRequest(job_queue="q", quota_share_name="QSoff"), state) == [
        ev.QuotaShareDeleted(at=NOW, job_queue="q", name="QSoff")
    ]


def test_job_requests_write_their_events(state: State) -> None:
    assert validate(
        pb.UpdateServiceJobRequest(job_id="waiting", scheduling_priority=9999), state
    ) == [ev.JobPriorityUpdated(at=NOW, job_id="waiting", scheduling_priority=9999)]
    assert validate(pb.TerminateServiceJobRequest(job_id="waiting", reason="stop"), state) == [
        ev.JobTerminationRequested(at=NOW, job_id="waiting", reason="stop")
    ]
    assert validate(
        pb.UpdateWarmPoolRequest(job_id="waiting", keep_alive_period_in_seconds=60), state
    ) == [
        ev.WarmPoolKeepAliveUpdated(
            at=NOW, job_id="waiting", keep_alive_seconds=60, pass_decides_expiry=True
        )
    ]


def test_draining_writes_once(state: State) -> None:
    assert validate(pb.DrainNodeRequest(host_id="h1"), state) == [
        ev.HostDrained(at=NOW, host_id="h1")
    ]
    drained = world()
    drained.apply(ev.HostDrained(at=NOW, host_id="h1"))

    assert validate(pb.DrainNodeRequest(host_id="h1"), drained.state) == []


# ---- idempotence keys and read queries ----------------------------------------------------


def test_a_request_fingerprint_ignores_how_the_queue_is_named_and_json_spacing() -> None:
    by_name = submit(client_token="t", service_request_payload=payload())
    by_arn = submit(
        client_token="t",
        job_queue=arn(Kind.JOB_QUEUE, "q"),
        service_request_payload=json.dumps(json.loads(payload()), indent=4),
    )
    other = submit(client_token="t", scheduling_priority=1)

    assert request_hash(by_name, "q") == request_hash(by_arn, "q")
    assert request_hash(by_name, "q") != request_hash(other, "q")


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (
            pb.ListServiceJobsRequest(
                job_queue="q", filters=[pb.KeyValuesPair(name="X", values=["1"])]
            ),
            "filters[0].name",
        ),
        (
            pb.ListServiceJobsRequest(
                job_queue="q", filters=[pb.KeyValuesPair(name="BEFORE_CREATED_AT", values=["soon"])]
            ),
            "filters[0].values",
        ),
        (
            pb.ListServiceJobsRequest(
                job_queue="q", filters=[pb.KeyValuesPair(name="JOB_NAME", values=[])]
            ),
            "filters[0].values",
        ),
        (pb.ListServiceJobsRequest(job_queue="q", max_results=-1), "max_results"),
        (pb.ListServiceJobsRequest(job_queue="q", job_status=42), "job_status"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_list_filter_is_rejected(state: State, request_: Request, field: str) -> None:
    with pytest.raises(RequestRejected) as rejected:
        queries.list_jobs(request_, state)

    assert (rejected.value.code, rejected.value.field) == (INVALID, field)


def test_a_list_query_resolves_names_and_parses_filters(state: State) -> None:
    query = queries.list_jobs(
        pb.ListServiceJobsRequest(
            job_queue=arn(Kind.JOB_QUEUE, "q"),
            quota_share_name="QS1",
            job_status=pb.JOB_STATUS_RUNNABLE,
            filters=[pb.KeyValuesPair(name="JOB_NAME", values=["train-*"])],
        ),
        state,
    )

    assert query == queries.JobsQuery(
        job_queue="q", quota_share="QS1", status="RUNNABLE", job_name="train-*", max_results=100
    )
