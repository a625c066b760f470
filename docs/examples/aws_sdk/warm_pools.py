"""SageMaker managed warm pools, as AWS's guide uses them, with the real SDK and boto3
against a `qm up` stack (`eval "$(qm aws-env)"` first; see quota_management.py).

A job asks to keep its hosts (`keep_alive_period_in_seconds`); once it ends,
DescribeTrainingJob shows its WarmPoolStatus Available; the next matching job
(same instance type and count, image, role...) reuses the pool, and the first job's
status turns Reused, naming the job that took it. UpdateTrainingJob changes the
keep-alive of the newest pool; 0 ends it (Terminated).
"""

import logging
import sys
import time
from pathlib import Path

import boto3
from sagemaker.train.aws_batch.training_queue import TrainingQueue
from sagemaker.train.configs import Compute, SourceCode, StoppingCondition
from sagemaker.train.model_trainer import ModelTrainer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from utils.aws_batch_resource_management import (
    AwsBatchResourceManager,
    JobStatus,
    QuotaShareConfig,
    await_jobs,
    create_quota_management_resources,
)

logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(name)s - %(message)s")
INSTANCE_TYPE = "ml.g5.xlarge"
ROLE = "arn:aws:iam::000000000000:role/quartermaster"

sagemaker = boto3.client("sagemaker")
resource_manager = AwsBatchResourceManager(boto3.client("batch"))
resources = create_quota_management_resources(
    resource_manager,
    scheduling_policy_name="warm-policy",
    job_queue_name="warm-queue",
    service_environment_name="warm-env",
    capacity_unit=INSTANCE_TYPE,
    max_capacity=3,
    quota_share_configs=[QuotaShareConfig("team", INSTANCE_TYPE, 3, False, "RESERVE")],
)
trainer = ModelTrainer(
    training_image="pytorch-training:2.5-gpu-py311",
    source_code=SourceCode(command="echo warm"),
    base_job_name="warm",
    compute=Compute(
        instance_type=INSTANCE_TYPE, instance_count=1, keep_alive_period_in_seconds=600
    ),
    stopping_condition=StoppingCondition(max_runtime_in_seconds=300),
    role=ROLE,
)
queue = TrainingQueue("warm-queue")


def training_job_of(queued_job: object) -> str:
    """The training job of the queued job's latest attempt (as the SDK finds it)."""
    arn = queued_job.describe()["latestAttempt"]["serviceResourceId"]["value"]  # type: ignore[attr-defined]
    return str(arn).rsplit("/", 1)[-1]


def warm_pool(name: str, want: str) -> dict[str, object]:
    """DescribeTrainingJob's WarmPoolStatus once it is `want`."""
    deadline = time.monotonic() + 60
    while True:
        status = sagemaker.describe_training_job(TrainingJobName=name).get("WarmPoolStatus", {})
        if status.get("Status") == want or time.monotonic() > deadline:
            return dict(status)
        time.sleep(0.2)


first = queue.submit(trainer, None, "warm-first", quota_share_name="team")
await_jobs([([first], {JobStatus.SUCCEEDED})])
first_training_job = training_job_of(first)
print("first:", first_training_job, warm_pool(first_training_job, "Available"))

second = queue.submit(trainer, None, "warm-second", quota_share_name="team")
await_jobs([([second], {JobStatus.SUCCEEDED})])
second_training_job = training_job_of(second)
reused = warm_pool(first_training_job, "Reused")
print("first after the second:", reused)
assert reused["Status"] == "Reused" and reused["ReusedByJob"] == second_training_job, reused
assert "ResourceRetainedBillableTimeInSeconds" in reused, reused
print("second:", second_training_job, warm_pool(second_training_job, "Available"))

sagemaker.update_training_job(
    TrainingJobName=second_training_job, ResourceConfig={"KeepAlivePeriodInSeconds": 0}
)
ended = warm_pool(second_training_job, "Terminated")
print("second after UpdateTrainingJob(KeepAlivePeriodInSeconds=0):", ended)
assert ended["Status"] == "Terminated", ended
resource_manager.delete_resources(resources)
print("warm pool example: done")
