"""Facts in a service job's life, from submission to its final status.

Requests come from admission, decisions from the scheduler's pass, and
attempt reports from node agents (one report per host of the attempt).
"""

from __future__ import annotations

import msgspec

from quartermaster.events import upcast
from quartermaster.events.base import Event, FailureClass, Request
from quartermaster.events.reasons import Rule


class EvaluateOnExit(msgspec.Struct, frozen=True):
    action: str  # RETRY | EXIT
    on_status_reason: str | None = None
    on_exit_code: str | None = None
    on_reason: str | None = None


class WarmPoolKey(msgspec.Struct, frozen=True):
    """The fields that must be equal for a job to reuse another job's warm pool."""

    role_arn: str = ""
    instance_type: str = ""
    instance_count: int = 1
    volume_kms_key_id: str = ""
    volume_size_in_gb: int = 0
    security_group_ids: tuple[str, ...] = ()
    subnets: tuple[str, ...] = ()
    inter_container_traffic_encryption: bool = False
    network_isolation: bool = False
    session_tag_chaining: bool = False
    session_tag_keys: tuple[str, ...] = ()


class JobSubmitted(Request, frozen=True, tag="job.submitted"):
    job_id: str
    job_name: str
    job_queue: str
    quota_share: str
    instance_type: str
    instance_count: int = 1
    scheduling_priority: int = 0
    retry_attempts: int = 1
    evaluate_on_exit: tuple[EvaluateOnExit, ...] = ()
    preemption_retries: int | None = None  # None = unlimited
    attempt_duration_seconds: int | None = None
    max_runtime_seconds: int | None = None
    keep_alive_seconds: int = 0
    warm_pool_key: WarmPoolKey = WarmPoolKey()
    payload: str = "{}"
    tags: dict[str, str] = {}
    client_token: str | None = None
    service_job_type: str = "SAGEMAKER_TRAINING"


class JobPriorityUpdated(Request, frozen=True, tag="job.priority_updated"):
    job_id: str
    scheduling_priority: int


class JobTerminationRequested(Request, frozen=True, tag="job.termination_requested"):
    job_id: str
    reason: str


class JobDispatched(Event, frozen=True, tag="job.dispatched"):
    """Decision: the attempt runs on these hosts (all at once), maybe on a warm pool.

    `rule` is OWN_QUOTA or BORROWED: the units its share holds with this job
    (`share_units`) against the share's own limit (`share_limit`).
    """

    job_id: str
    attempt: int
    hosts: tuple[str, ...]
    warm_pool: str | None = None  # job id whose Available pool is taken
    rule: Rule | None = None  # None: recorded before decisions carried their rule
    share_units: int | None = None
    share_limit: int | None = None


class JobPreemptionRequested(Event, frozen=True, tag="job.preemption_requested"):
    """Decision: stop this attempt so another job can run (SIGTERM, grace, SIGKILL).

    `rule` RECLAIM: `lender_share` takes back units the victim's share borrows
    (`units_borrowed` above its own limit); LIMIT_LOWERED: the same for units above
    a lowered limit; IN_SHARE: `for_job` outranks the victim by `priority_gap`. Each
    also records the victim's `seconds_at_risk` (`core.preemption.seconds_at_risk`).
    """

    job_id: str
    attempt: int
    reason: str
    for_job: str
    rule: Rule | None = None
    lender_share: str | None = None
    units_borrowed: int | None = None
    priority_gap: int | None = None
    # The work the victim loses: seconds since its last checkpoint (or its dispatch,
    # without one) at the pass's time. None: recorded before decisions carried it.
    seconds_at_risk: float | None = None

    def __post_init__(self) -> None:
        if self.rule is None:  # upcast: older records name the rule in their text only
            rule, lender = upcast.preemption(self.reason)
            upcast.fill(self, rule=rule, lender_share=self.lender_share or lender)


class JobTimedOut(Event, frozen=True, tag="job.timed_out"):
    """Decision: the attempt ran past its duration limit and is being stopped."""

    job_id: str
    attempt: int
    reason: str
    rule: Rule = Rule.TIMEOUT
    timeout_seconds: int | None = None  # the limit in force


class JobStatusReasonSet(Event, frozen=True, tag="job.status_reason_set"):
    """Decision: a job that can never fit says why (MISCONFIGURATION)."""

    job_id: str
    reason: str
    rule: Rule = Rule.MISCONFIGURATION
    instances_needed: int | None = None
    instances_allowed: int | None = None  # most the environment or the share can give


class JobStopConfirmed(Event, frozen=True, tag="job.stop_confirmed"):
    """A node agent stopped its part of the attempt; its host is free again."""

    job_id: str
    attempt: int
    host: str
    exit_code: int | None = None
    model_artifacts: str = ""  # the attempt's model.tar.gz as uploaded (s3://); "": none


class JobStarting(Event, frozen=True, tag="job.starting"):
    job_id: str
    attempt: int
    host: str


class StartPhases(msgspec.Struct, frozen=True, kw_only=True):
    """How long each phase of one host's start took (seconds); 0: skipped (kept warm)."""

    pull_s: float = 0.0  # pulling the training image from the host's registry
    volume_s: float = 0.0  # creating the job's volume
    staging_s: float = 0.0  # staging the input channels
    container_s: float = 0.0  # creating (or taking the ready sandbox) and starting it
    warm: bool = False  # the host reused what its warm pool kept


class JobRunning(Event, frozen=True, tag="job.running"):
    job_id: str
    attempt: int
    host: str
    start_phases: StartPhases | None = None  # None: not measured (process runtime, old events)


class JobCheckpointed(Event, frozen=True, tag="job.checkpointed"):
    """A node agent finished one upload round of the attempt's checkpoint folder: the
    work up to `at` survives a stop. `bytes` and `files`: what the round uploaded."""

    job_id: str
    attempt: int
    host: str
    bytes: int = 0
    files: int = 0


class JobSucceeded(Event, frozen=True, tag="job.succeeded"):
    job_id: str
    attempt: int
    host: str
    exit_code: int = 0
    model_artifacts: str = ""  # the attempt's model.tar.gz as uploaded (s3://); "": none


class JobFailed(Event, frozen=True, tag="job.failed"):
    """One host's part of an attempt failed; the first failure fails the attempt."""

    job_id: str
    attempt: int
    host: str
    reason: str
    failure_class: FailureClass = FailureClass.ALGORITHM_ERROR
    exit_code: int | None = None
    log_tail: str = ""
    model_artifacts: str = ""  # the attempt's model.tar.gz as uploaded (s3://); "": none


class JobRetried(Event, frozen=True, tag="job.retried"):
    """Decision: a failed attempt is retried under the job's retry strategy."""

    job_id: str
    attempt: int  # the new attempt's number
    reason: str
    rule: Rule = Rule.RETRY
    attempts_allowed: int | None = None  # retryStrategy.attempts
    exit_rule_index: int | None = None  # the evaluateOnExit rule that matched; None: none did


class JobFinallyFailed(Event, frozen=True, tag="job.finally_failed"):
    """Decision: a failed attempt ends the job (RETRIES_EXHAUSTED or EXIT_RULE)."""

    job_id: str
    reason: str
    rule: Rule | None = None
    attempts_used: int | None = None
    exit_rule_index: int | None = None
