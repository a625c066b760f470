"""Retry strategy: `evaluateOnExit` rules matched with globs, as in AWS Batch."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import NamedTuple

from quartermaster.core.model import Job
from quartermaster.events import Rule


class Outcome(NamedTuple):
    rule: Rule  # RETRY, RETRIES_EXHAUSTED or EXIT_RULE
    exit_rule_index: int | None  # the evaluateOnExit rule that matched; None: none did


def _matches(pattern: str | None, value: str) -> bool:
    return pattern is None or fnmatchcase(value, pattern)


def matching_rule(job: Job) -> int | None:
    """Index of the first evaluateOnExit rule matching the failed attempt."""
    exit_code = "" if job.failure_exit_code is None else str(job.failure_exit_code)
    for index, rule in enumerate(job.evaluate_on_exit):
        if (
            _matches(rule.on_status_reason, job.failure_reason)
            and _matches(rule.on_reason, job.failure_reason)
            and _matches(rule.on_exit_code, exit_code)
        ):
            return index
    return None


def outcome(job: Job) -> Outcome:
    """Retry or fail the failed attempt. The first matching rule says RETRY or EXIT;
    with none matching (or none given) the attempt is retried, like Batch, while
    `attempts` (every RUNNABLE counted, the first included) allows another."""
    index = matching_rule(job)
    if job.attempts_used >= job.retry_attempts:
        return Outcome(Rule.RETRIES_EXHAUSTED, index)
    if index is not None and job.evaluate_on_exit[index].action.upper() != "RETRY":
        return Outcome(Rule.EXIT_RULE, index)
    return Outcome(Rule.RETRY, index)
