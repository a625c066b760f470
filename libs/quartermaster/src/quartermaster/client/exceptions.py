"""The SDK's exceptions (`sagemaker.train.aws_batch.exception`), same names and meaning."""

from __future__ import annotations


class NoTrainingJob(Exception):
    """No attempt has started yet: the job still waits in the queue."""


class MissingRequiredArgument(Exception):
    """A response lacks a member it must have."""
