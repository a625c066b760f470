"""The SDK-shaped client's translations: protobuf answers as boto3 dicts, SDK dicts and
the trainer builder as requests."""

from __future__ import annotations

import json

import pytest

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client import Compute, ModelTrainer, SourceCode, StoppingCondition
from quartermaster.client.queued_job import job_id_of
from quartermaster.client.shapes import (
    aws_output,
    enum_text,
    job_detail,
    preemption_configuration,
    retry_strategy,
    timeout_config,
)
from quartermaster.client.trainer import trainer_from_payload
from quartermaster.client.training_queue import TrainingQueue


def test_a_job_detail_reads_as_describe_service_job_does_in_boto3() -> None:
    detail = pb.ServiceJobDetail(
        job_id="j1",
        job_name="train",
        job_arn="arn:aws:batch:local:000000000000:job/j1",
        job_queue="q",
        quota_share_name="QS1",
        service_job_type="SAGEMAKER_TRAINING",
        status=pb.JOB_STATUS_RUNNABLE,
        status_reason="Preempted",
        created_at=1_700_000_000_123,
        attempts=[pb.ServiceJobAttemptDetail(host_ids=["node-1"], started_at=5, exit_code=0)],
        preemption_summary=pb.ServiceJobPreemptionSummary(preempted_attempt_count=1),
        warm_pool_status=pb.WarmPoolStatusDetail(status=pb.WARM_POOL_STATUS_AVAILABLE),
        tags={"team": "a"},
    )
    shown = job_detail(detail)
    assert shown["status"] == "RUNNABLE"
    assert shown["jobArn"].endswith("job/j1") and shown["jobName"] == "train"
    assert shown["quotaShareName"] == "QS1" and shown["statusReason"] == "Preempted"
    assert shown["createdAt"] == 1_700_000_000_123 and isinstance(shown["createdAt"], int)
    assert shown["schedulingPriority"] == 0 and shown["isTerminated"] is False
    # An optional member set to 0 is shown (exitCode 0 is an exit); unset ones are left out.
    assert shown["attempts"] == [{"hostIds": ["node-1"], "startedAt": 5, "exitCode": 0}]
    assert shown["preemptionSummary"] == {"preemptedAttemptCount": 1}
    assert shown["warmPoolStatus"] == {"status": "AVAILABLE"}
    assert shown["tags"] == {"team": "a"}


def test_an_attempt_shows_its_training_job_and_model() -> None:
    attempt = pb.ServiceJobAttemptDetail(
        host_ids=["node-1"],
        training_job_name="train-1a2b3c4d-1",
        training_job_arn="arn:aws:sagemaker:us-east-1:000000000000:training-job/train-1a2b3c4d-1",
        model_artifacts="s3://models/train-1a2b3c4d-1/output/model.tar.gz",
    )
    shown = job_detail(pb.ServiceJobDetail(job_id="j1", attempts=[attempt]))

    assert shown["attempts"] == [
        {
            "hostIds": ["node-1"],
            "trainingJobName": "train-1a2b3c4d-1",
            "trainingJobArn": (
                "arn:aws:sagemaker:us-east-1:000000000000:training-job/train-1a2b3c4d-1"
            ),
            "modelArtifacts": "s3://models/train-1a2b3c4d-1/output/model.tar.gz",
        }
    ]
    assert "stoppedAt" not in shown and "waitReason" not in shown
    json.dumps(shown)  # plain data


def test_an_answer_reads_as_the_aws_output_of_the_same_name() -> None:
    share = pb.QuotaShareDetail(quota_share_name="QS1", state=pb.QUOTA_SHARE_STATE_ENABLED)
    described = pb.DescribeQuotaShareResponse(quota_share=share, oversubscribed=True)
    queue = pb.JobQueueDetail(
        job_queue_name="q", job_queue_arn="arn:q", state=pb.QUEUE_STATE_ENABLED
    )
    job = pb.ServiceJobDetail(job_id="j1")

    assert aws_output(described) == {
        "quotaShareName": "QS1",
        "state": "ENABLED",
        "oversubscribed": True,
    }
    assert aws_output(pb.ListServiceJobsResponse()) == {"jobSummaryList": []}
    assert aws_output(pb.ListTagsForResourceResponse()) == {"tags": {}}
    # A required member is shown at zero (a queue's priority 0).
    assert aws_output(pb.DescribeJobQueuesResponse(job_queues=[queue])) == {
        "jobQueues": [
            {"jobQueueName": "q", "jobQueueArn": "arn:q", "state": "ENABLED", "priority": 0}
        ]
    }
    assert aws_output(pb.DescribeServiceJobResponse(job=job)) == job_detail(job)


def test_enum_text_strips_the_type_prefix_and_hides_unspecified() -> None:
    assert enum_text(pb.JobStatus.DESCRIPTOR, pb.JOB_STATUS_SUCCEEDED) == "SUCCEEDED"
    assert enum_text(pb.SharingStrategy.DESCRIPTOR, pb.SHARING_STRATEGY_LEND_AND_BORROW) == (
        "LEND_AND_BORROW"
    )
    assert enum_text(pb.JobStatus.DESCRIPTOR, 0) == ""


def test_sdk_dicts_become_request_fields() -> None:
    retry = retry_strategy(
        {"attempts": 3, "evaluateOnExit": [{"action": "exit", "onExitCode": "137"}]}
    )
    assert retry.attempts == 3
    assert retry.evaluate_on_exit[0].action == pb.RETRY_ACTION_EXIT
    assert retry.evaluate_on_exit[0].on_exit_code == "137"
    assert timeout_config({"attemptDurationSeconds": 60}).attempt_duration_seconds == 60
    assert preemption_configuration({"preemptionRetriesBeforeTermination": 0}).HasField(
        "preemption_retries_before_termination"
    )
    assert not preemption_configuration({}).HasField("preemption_retries_before_termination")
    with pytest.raises(ValueError):
        retry_strategy({"evaluateOnExit": [{"action": "SOMETIMES"}]})


def test_the_trainer_builds_the_create_training_job_payload() -> None:
    trainer = ModelTrainer(
        training_image="my/image:1",
        source_code=SourceCode(command="echo 'Hello World'"),
        base_job_name="hello-world",
        compute=Compute(instance_type="ml.g5.xlarge", instance_count=2),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=300),
        tags=[{"Key": "team", "Value": "a"}],
    )
    payload = trainer.training_job_payload({"train": "s3://bucket/data"})
    assert payload["TrainingJobName"].startswith("hello-world-")
    spec = payload["AlgorithmSpecification"]
    assert spec["ContainerEntrypoint"] == ["sh"]
    assert spec["ContainerArguments"] == ["-c", "echo 'Hello World'"]
    assert payload["ResourceConfig"]["InstanceCount"] == 2
    assert payload["StoppingCondition"] == {"MaxRuntimeInSeconds": 300}
    assert payload["InputDataConfig"][0]["ChannelName"] == "train"
    script = ModelTrainer(source_code=SourceCode(entry_script="train.py")).command()
    assert script == ["python", "train.py"]


def test_a_payload_gives_back_its_trainer() -> None:
    trainer = ModelTrainer(
        training_image="img:1",
        source_code=SourceCode(command="python train.py --epochs 3"),
        base_job_name="resnet",
        compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=60),
        tags=[{"Key": "aws:internal", "Value": "x"}, {"Key": "team", "Value": "a"}],
    )
    back = trainer_from_payload(trainer.training_job_payload())
    assert back.base_job_name == "resnet"
    assert back.training_image == "img:1"
    assert back.command() == ["sh", "-c", "python train.py --epochs 3"]
    assert back.compute == trainer.compute
    assert back.stopping_condition == trainer.stopping_condition
    assert back.tags == [{"Key": "team", "Value": "a"}]  # system tags dropped, as the SDK does
    plain = trainer_from_payload(
        {
            "AlgorithmSpecification": {
                "ContainerEntrypoint": ["python"],
                "ContainerArguments": ["a b"],
            }
        }
    )
    assert plain.command() == ["sh", "-c", "python 'a b'"]


def test_job_ids_come_from_arns() -> None:
    assert job_id_of("arn:aws:batch:local:000000000000:job/abc") == "abc"
    assert job_id_of("abc") == "abc"


class NoCalls:
    """A client that fails the test if the queue calls it."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"unexpected call {name}")


def test_the_queue_refuses_what_the_sdk_refuses_before_any_call() -> None:
    queue = TrainingQueue("q", NoCalls())  # type: ignore[arg-type]
    trainer = ModelTrainer(source_code=SourceCode(command="true"))
    with pytest.raises(ValueError, match="not both"):
        queue.submit(trainer, None, share_identifier="s", quota_share_name="QS1")
    with pytest.raises(ValueError, match="quota-managed"):
        queue.list_jobs_by_share(share_identifier="s")
    with pytest.raises(TypeError, match="ModelTrainer"):
        queue.submit(42, None, quota_share_name="QS1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="number of job names"):
        queue.map(trainer, [None, None], job_names=["one"])
