"""Getting Started with Quota Management: the SageMaker SDK v3 notebook
(v3-examples/training-examples/aws_batch/sm-training-queues_quota-management.ipynb),
cell by cell, with the real SDK and boto3, against a `qm up` stack.

Nothing in the code names Quartermaster: the environment does. Run it as
    qm up &                          # in another shell
    eval "$(qm aws-env)"             # AWS_ENDPOINT_URL, a key pair, the CA, the SDK config
    python docs/examples/aws_sdk/quota_management.py
What differs from the notebook: the image (any name: `qm up`'s process runtime runs
the command on the host), the role (the stack's role map names the one jobs may use),
and the command, which sleeps: a SageMaker job takes minutes to start and so stays
around long enough to be preempted, a Quartermaster job starts in milliseconds. At the
end the jobs are terminated and every resource deleted (the notebook's optional cleanup).
"""

# %% Setup and Configure Training Job Variables
INSTANCE_TYPE = "ml.g5.xlarge"
INSTANCE_COUNT = 1
MAX_RUN_TIME = 300
TRAINING_JOB_NAME = "hello-world-simple-job"
ROLE = "arn:aws:iam::000000000000:role/quartermaster"  # sagemaker.get_execution_role() on AWS

# %%
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import boto3  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the notebook's utils/ folder
logging.basicConfig(
    level=logging.INFO, format="%(asctime)s - %(name)s - %(levelname)s - %(message)s"
)
logger = logging.getLogger(__name__)

image_uri = "pytorch-training:2.5-gpu-py311"  # image_uris.retrieve(framework="pytorch", ...)

# %% Create Sample Resources
from utils.aws_batch_resource_management import (  # noqa: E402
    AwsBatchResourceManager,
    QuotaShareConfig,
    create_quota_management_resources,
)

SCHEDULING_POLICY_NAME = "my-qm-scheduling-policy"
JOB_QUEUE_NAME = "my-sm-training-qm-jq"
SERVICE_ENVIRONMENT_NAME = "my-sm-training-qm-se"

resource_manager = AwsBatchResourceManager(boto3.client("batch"))
qs1 = QuotaShareConfig(
    name="QS1",
    capacity_unit=INSTANCE_TYPE,
    max_capacity=1,
    in_share_preemption=True,
    sharing_strategy="LEND_AND_BORROW",
    borrow_limit=200,
)
qs2 = QuotaShareConfig(
    name="QS2",
    capacity_unit=INSTANCE_TYPE,
    max_capacity=1,
    in_share_preemption=False,
    sharing_strategy="LEND",
)
qs3 = QuotaShareConfig(
    name="QS3",
    capacity_unit=INSTANCE_TYPE,
    max_capacity=1,
    in_share_preemption=False,
    sharing_strategy="RESERVE",
)
resources = create_quota_management_resources(
    resource_manager=resource_manager,
    scheduling_policy_name=SCHEDULING_POLICY_NAME,
    job_queue_name=JOB_QUEUE_NAME,
    service_environment_name=SERVICE_ENVIRONMENT_NAME,
    capacity_unit=INSTANCE_TYPE,
    max_capacity=3,
    quota_share_configs=[qs1, qs2, qs3],
)
# Run twice, the helpers skip what exists ("Object already exists"), as on AWS.
create_quota_management_resources(
    resource_manager, SCHEDULING_POLICY_NAME, JOB_QUEUE_NAME, SERVICE_ENVIRONMENT_NAME,
    INSTANCE_TYPE, 3, [qs1, qs2, qs3],
)  # fmt: skip

# %% Create Hello World Model Trainer
from sagemaker.train.configs import Compute, SourceCode, StoppingCondition  # noqa: E402
from sagemaker.train.model_trainer import ModelTrainer  # noqa: E402

source_code = SourceCode(command="echo 'Hello World'; sleep 300")

model_trainer = ModelTrainer(
    training_image=image_uri,
    source_code=source_code,
    base_job_name=TRAINING_JOB_NAME,
    compute=Compute(instance_type=INSTANCE_TYPE, instance_count=INSTANCE_COUNT),
    stopping_condition=StoppingCondition(max_runtime_in_seconds=MAX_RUN_TIME),
    role=ROLE,
)

# %% Create TrainingQueue object
from sagemaker.train.aws_batch.training_queue import TrainingQueue  # noqa: E402

queue = TrainingQueue(JOB_QUEUE_NAME)
logger.info(f"Using queue: {queue.queue_name}")

# %% Submit Some Training Jobs to Quota Share QS1
from utils.aws_batch_resource_management import (  # noqa: E402
    JobStatus,
    await_jobs,
    list_jobs_by_quota_share,
)

# Three jobs in QS1, each of another priority to guarantee dispatch ordering.
qs1_job_high = queue.submit(
    job_name="qs1_job_high",
    training_job=model_trainer,
    quota_share_name=qs1.name,
    priority=3,
    inputs=None,
)
qs1_job_med = queue.submit(
    job_name="qs1_job_med",
    training_job=model_trainer,
    quota_share_name=qs1.name,
    priority=2,
    inputs=None,
)
qs1_job_low = queue.submit(
    job_name="qs1_job_low",
    training_job=model_trainer,
    quota_share_name=qs1.name,
    priority=1,
    inputs=None,
)
logger.info("Waiting for jobs to transition...")

# qs1_job_high runs on QS1's own capacity, qs1_job_med borrows QS2's idle capacity
await_jobs([([qs1_job_high, qs1_job_med], JobStatus.dispatched() | JobStatus.terminal())])
list_jobs_by_quota_share(queue, [qs1.name, qs2.name, qs3.name], JobStatus.active())

# %% Submit a Job to Quota Share QS2: it preempts its capacity back from QS1
qs2_job_1 = queue.submit(
    job_name="qs2_job_1",
    training_job=model_trainer,
    quota_share_name=qs2.name,
    priority=1,
    inputs=None,
)
await_jobs(
    [
        ([qs2_job_1], JobStatus.dispatched() | JobStatus.terminal()),
        ([qs1_job_med], {JobStatus.RUNNABLE}),  # the lowest priority QS1 job is preempted
    ]
)
list_jobs_by_quota_share(queue, [qs1.name, qs2.name, qs3.name], JobStatus.active())

# %% Update job priority: qs1_job_low becomes QS1's most important job
qs1_job_low.update(scheduling_priority=4)
await_jobs(
    [
        ([qs1_job_low], JobStatus.dispatched() | JobStatus.terminal()),
        ([qs1_job_high], {JobStatus.RUNNABLE}),  # in-share preemption
    ]
)
by_share = list_jobs_by_quota_share(queue, [qs1.name, qs2.name, qs3.name], JobStatus.active())

# %% Where things stand (not in the notebook): what the seed scenario of the spec expects
await_jobs([([qs1_job_low, qs2_job_1], {JobStatus.RUNNING})])
running = {j.job_name for j in queue.list_jobs(status="RUNNING")}
assert running == {"qs1_job_low", "qs2_job_1"}, running
assert queue.list_jobs_by_share("RUNNING", quota_share_name=qs3.name) == []
med = qs1_job_med.describe()
assert med["preemptionSummary"]["preemptedAttemptCount"] == 1, med
# Each attempt is a training job; the SDK rebuilds the trainer from DescribeTrainingJob.
trainer = qs1_job_low.get_model_trainer()
assert trainer.compute.instance_type == INSTANCE_TYPE, trainer.compute
assert trainer.role == ROLE, trainer.role
logger.info("The seed scenario played out: 2 preemptions, QS3's host stayed idle")

# %% Cleanup: terminate the jobs, then delete every resource
for job in (qs1_job_high, qs1_job_med, qs1_job_low, qs2_job_1):
    job.terminate(reason="example over")
await_jobs([([qs1_job_high, qs1_job_med, qs1_job_low, qs2_job_1], JobStatus.terminal())])
resource_manager.delete_resources(resources)
print("quota management example: done")
