"""Retry strategy: `evaluateOnExit` rules matched with globs, as in AWS Batch."""

from __future__ import annotations

from fnmatch import fnmatchcase

from quartermaster.core.model import Job


def _matches(pattern: str | None, value: str) -> bool:
    return pattern is None or fnmatchcase(value, pattern)


def action_for(job: Job) -> str:
    """RETRY or EXIT for the job's failed attempt; the first matching rule wins.

    With no rule matching (or none given) the attempt is retried, like Batch.
    """
    exit_code = "" if job.failure_exit_code is None else str(job.failure_exit_code)
    for rule in job.evaluate_on_exit:
        if (
            _matches(rule.on_status_reason, job.failure_reason)
            and _matches(rule.on_reason, job.failure_reason)
            and _matches(rule.on_exit_code, exit_code)
        ):
            return rule.action.upper()
    return "RETRY"


def retries_left(job: Job) -> bool:
    return job.attempts_used < job.retry_attempts
