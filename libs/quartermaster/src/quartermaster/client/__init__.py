"""The Python client: `TrainingQueue` / `TrainingQueuedJob` shaped as SageMaker SDK v3's
`sagemaker.train.aws_batch`, a trainer-like builder, plus `Quartermaster` for admin."""

from quartermaster.client.connection import Quartermaster, QuartermasterError, default_client
from quartermaster.client.exceptions import MissingRequiredArgument, NoTrainingJob
from quartermaster.client.payload import training_job
from quartermaster.client.queued_job import TrainingQueuedJob
from quartermaster.client.trainer import Compute, ModelTrainer, SourceCode, StoppingCondition
from quartermaster.client.training_queue import TrainingQueue

__all__ = [
    "Compute",
    "MissingRequiredArgument",
    "ModelTrainer",
    "NoTrainingJob",
    "Quartermaster",
    "QuartermasterError",
    "SourceCode",
    "StoppingCondition",
    "TrainingQueue",
    "TrainingQueuedJob",
    "default_client",
    "training_job",
]
