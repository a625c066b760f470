"""The Python client: `TrainingQueue` / `TrainingQueuedJob` like the SageMaker SDK, plus admin."""

from quartermaster.client.connection import Quartermaster, QuartermasterError
from quartermaster.client.payload import training_job
from quartermaster.client.training_queue import TrainingQueue, TrainingQueuedJob

__all__ = [
    "Quartermaster",
    "QuartermasterError",
    "TrainingQueue",
    "TrainingQueuedJob",
    "training_job",
]
