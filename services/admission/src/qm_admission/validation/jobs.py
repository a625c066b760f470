"""Job requests: submit, update priority, terminate."""

from __future__ import annotations

from collections.abc import Mapping

from qm_admission.errors import failed_precondition, invalid
from qm_admission.names import check_name
from qm_admission.validation import common
from qm_admission.validation.command import check_command
from qm_admission.validation.payload import parse_payload
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State
from quartermaster.core.model import TERMINAL_STATUSES

SERVICE_JOB_TYPE = "SAGEMAKER_TRAINING"
MAX_ATTEMPTS = 10
MAX_EVALUATE_ON_EXIT = 5
MAX_GLOB = 512
MAX_TAGS = 50
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
MAX_CLIENT_TOKEN = 64
MAX_REASON = 1024
_ACTIONS = {pb.RETRY_ACTION_RETRY: "RETRY", pb.RETRY_ACTION_EXIT: "EXIT"}


def queue_name(request: pb.SubmitServiceJobRequest, state: State) -> str:
    """The existing queue a submission names (name or ARN); NOT_FOUND otherwise."""
    return common.queue(state, "job_queue", request.job_queue).name


def check_client_token(token: str) -> str:
    if len(token) > MAX_CLIENT_TOKEN:
        raise invalid("client_token", f"must be at most {MAX_CLIENT_TOKEN} characters")
    if not all(" " <= c <= "~" for c in token):
        raise invalid("client_token", "must be printable ASCII")
    return token


def submit_job(
    request: pb.SubmitServiceJobRequest,
    state: State,
    *,
    job_id: str,
    at: float,
    max_keep_alive_seconds: int,
    require_command: bool = False,
    known_roles: frozenset[str] | None = None,
) -> list[ev.Event]:
    """The `JobSubmitted` of a valid submission; `job_id` and `at` come from the caller.
    `require_command`: hosts run processes, so the job must say what to run.
    `known_roles`: the execution roles hosts hold credentials for (None: any role)."""
    name = check_name("job_name", request.job_name)
    queue = common.queue(state, "job_queue", request.job_queue)
    share = common.share(state, queue.name, "quota_share_name", request.quota_share_name)
    if request.service_job_type not in ("", SERVICE_JOB_TYPE):
        raise invalid("service_job_type", f"must be {SERVICE_JOB_TYPE}")
    priority = common.priority("scheduling_priority", request.scheduling_priority)
    attempts, evaluate_on_exit = _retry_strategy(request.retry_strategy)
    preemption_retries = _preemption_retries(request.preemption_configuration)
    attempt_duration = request.timeout_config.attempt_duration_seconds
    if attempt_duration < 0:
        raise invalid("timeout_config.attempt_duration_seconds", "must be >= 0 (0 = no limit)")
    _check_tags(request.tags)
    token = check_client_token(request.client_token)
    resources = parse_payload(request.service_request_payload, max_keep_alive_seconds, known_roles)
    env = state.environments.get(queue.environment)
    units = env.max_capacity if env is not None else {}
    if resources.instance_type not in units:
        raise invalid(
            "service_request_payload.ResourceConfig.InstanceType",
            f"{resources.instance_type!r} is not a capacity unit of service environment "
            f"{queue.environment!r} ({', '.join(sorted(units)) or 'none'})",
        )
    if queue.state is not ev.State.ENABLED:
        raise failed_precondition("job_queue", f"job queue {queue.name!r} is DISABLED")
    if share.state is not ev.State.ENABLED:
        raise failed_precondition("quota_share_name", f"quota share {share.name!r} is DISABLED")
    if require_command:
        check_command(resources.document)
    return [
        ev.JobSubmitted(
            at=at,
            job_id=job_id,
            job_name=name,
            job_queue=queue.name,
            quota_share=share.name,
            instance_type=resources.instance_type,
            instance_count=resources.instance_count,
            scheduling_priority=priority,
            retry_attempts=attempts,
            evaluate_on_exit=evaluate_on_exit,
            preemption_retries=preemption_retries,
            attempt_duration_seconds=attempt_duration or None,
            max_runtime_seconds=resources.max_runtime_seconds,
            keep_alive_seconds=resources.keep_alive_seconds,
            warm_pool_key=resources.warm_pool_key,
            payload=request.service_request_payload,
            tags=dict(request.tags),
            client_token=token or None,
            service_job_type=SERVICE_JOB_TYPE,
        )
    ]


def update_job(request: pb.UpdateServiceJobRequest, state: State, *, at: float) -> list[ev.Event]:
    job = common.job(state, "job_id", request.job_id)
    priority = common.priority("scheduling_priority", request.scheduling_priority)
    if job.status in TERMINAL_STATUSES:
        raise failed_precondition("job_id", f"job {job.job_id} is {job.status.value}")
    return [ev.JobPriorityUpdated(at=at, job_id=job.job_id, scheduling_priority=priority)]


def terminate_job(
    request: pb.TerminateServiceJobRequest, state: State, *, at: float
) -> list[ev.Event]:
    job = common.job(state, "job_id", request.job_id)
    if not request.reason:
        raise invalid("reason", "is required (it becomes the job's status reason)")
    if len(request.reason) > MAX_REASON:
        raise invalid("reason", f"must be at most {MAX_REASON} characters")
    if job.status in TERMINAL_STATUSES:
        raise failed_precondition("job_id", f"job {job.job_id} is already {job.status.value}")
    return [ev.JobTerminationRequested(at=at, job_id=job.job_id, reason=request.reason)]


# ---- parts of a submission -------------------------------------------------------


def _retry_strategy(
    strategy: pb.ServiceJobRetryStrategy,
) -> tuple[int, tuple[ev.EvaluateOnExit, ...]]:
    attempts = strategy.attempts or 1
    if not 1 <= attempts <= MAX_ATTEMPTS:
        raise invalid("retry_strategy.attempts", f"must be 1-{MAX_ATTEMPTS}, got {attempts}")
    rules = strategy.evaluate_on_exit
    if len(rules) > MAX_EVALUATE_ON_EXIT:
        raise invalid(
            "retry_strategy.evaluate_on_exit",
            f"allows at most {MAX_EVALUATE_ON_EXIT} entries, got {len(rules)}",
        )
    out = []
    for i, rule in enumerate(rules):
        at = f"retry_strategy.evaluate_on_exit[{i}]"
        action = _ACTIONS.get(rule.action)
        if action is None:
            raise invalid(f"{at}.action", "must be RETRY or EXIT")
        for glob_field in ("on_status_reason", "on_exit_code", "on_reason"):
            if len(getattr(rule, glob_field)) > MAX_GLOB:
                raise invalid(f"{at}.{glob_field}", f"must be at most {MAX_GLOB} characters")
        out.append(
            ev.EvaluateOnExit(
                action=action,
                on_status_reason=rule.on_status_reason or None,
                on_exit_code=rule.on_exit_code or None,
                on_reason=rule.on_reason or None,
            )
        )
    return attempts, tuple(out)


def _preemption_retries(config: pb.ServiceJobPreemptionConfiguration) -> int | None:
    if not config.HasField("preemption_retries_before_termination"):
        return None
    value = config.preemption_retries_before_termination
    if value < 0:
        raise invalid(
            "preemption_configuration.preemption_retries_before_termination",
            f"must be >= 0 (unset = unlimited), got {value}",
        )
    return value


def _check_tags(tags: Mapping[str, str]) -> None:
    if len(tags) > MAX_TAGS:
        raise invalid("tags", f"allows at most {MAX_TAGS} tags, got {len(tags)}")
    for key, value in tags.items():
        if not 1 <= len(key) <= MAX_TAG_KEY:
            raise invalid("tags", f"tag keys must be 1-{MAX_TAG_KEY} characters, got {key!r}")
        if len(value) > MAX_TAG_VALUE:
            raise invalid("tags", f"tag {key!r}: values must be at most {MAX_TAG_VALUE} characters")
