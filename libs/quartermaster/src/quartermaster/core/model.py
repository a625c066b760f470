"""The entities the fold keeps: configuration, jobs, hosts and warm pools.

Mutable msgspec Structs: the fold updates them in place (fast), and the same
types encode to a snapshot so a restarted scheduler replays only the tail.
The numerous ones (jobs, attempts, hosts, pools) encode as arrays (a snapshot
carries no field names: a third of the size, decoded faster) and are not tracked
by the garbage collector (they hold no reference cycles; a million jobs would
otherwise make every full collection walk them). New fields go at the end, with
a default, so a snapshot written before them still decodes.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from quartermaster.events import (
    EvaluateOnExit,
    FailureClass,
    SharingStrategy,
    StartPhases,
    WarmPoolKey,
)
from quartermaster.events import State as Toggle


class JobStatus(StrEnum):
    SUBMITTED = "SUBMITTED"
    RUNNABLE = "RUNNABLE"
    SCHEDULED = "SCHEDULED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


ACTIVE_STATUSES = frozenset({JobStatus.SCHEDULED, JobStatus.STARTING, JobStatus.RUNNING})
TERMINAL_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED})


class StopCause(StrEnum):
    """Why an attempt's hosts are being stopped; decides what the job becomes."""

    PREEMPTED = "PREEMPTED"
    TERMINATED = "TERMINATED"
    TIMED_OUT = "TIMED_OUT"
    PEER_FAILED = "PEER_FAILED"
    HOST_LOST = "HOST_LOST"


class HostStatus(StrEnum):
    HEALTHY = "HEALTHY"
    DRAINED = "DRAINED"
    LOST = "LOST"


class WarmPoolStatus(StrEnum):
    AVAILABLE = "Available"
    IN_USE = "InUse"
    REUSED = "Reused"
    TERMINATED = "Terminated"


# The members as plain names for the fold, which reads them several times an event:
# `JobStatus.RUNNABLE` is a lookup through the enum's metaclass (about 0.1 us each).
RUNNABLE = JobStatus.RUNNABLE
SCHEDULED = JobStatus.SCHEDULED
STARTING = JobStatus.STARTING
RUNNING = JobStatus.RUNNING
SUCCEEDED = JobStatus.SUCCEEDED
FAILED = JobStatus.FAILED
STOP_PREEMPTED = StopCause.PREEMPTED
STOP_TERMINATED = StopCause.TERMINATED
STOP_TIMED_OUT = StopCause.TIMED_OUT
STOP_PEER_FAILED = StopCause.PEER_FAILED
STOP_HOST_LOST = StopCause.HOST_LOST
HOST_HEALTHY = HostStatus.HEALTHY
HOST_DRAINED = HostStatus.DRAINED
HOST_LOST = HostStatus.LOST
POOL_AVAILABLE = WarmPoolStatus.AVAILABLE
POOL_IN_USE = WarmPoolStatus.IN_USE
POOL_REUSED = WarmPoolStatus.REUSED
POOL_TERMINATED = WarmPoolStatus.TERMINATED


class Environment(msgspec.Struct):
    name: str
    max_capacity: dict[str, int]
    state: Toggle = Toggle.ENABLED
    tags: dict[str, str] = {}


class Queue(msgspec.Struct):
    name: str
    environment: str
    policy: str
    state: Toggle = Toggle.ENABLED
    tags: dict[str, str] = {}
    priority: int = 1


class Share(msgspec.Struct):
    queue: str
    name: str
    limits: dict[str, int]
    strategy: SharingStrategy
    borrow_limit: int = -1
    in_share_preemption: Toggle = Toggle.DISABLED
    state: Toggle = Toggle.ENABLED
    tags: dict[str, str] = {}

    def own(self, unit: str) -> int:
        return self.limits.get(unit, 0)

    def cap(self, unit: str) -> int | None:
        """Most units the share may hold; None = no cap (LEND_AND_BORROW, -1)."""
        own = self.own(unit)
        if self.strategy is not SharingStrategy.LEND_AND_BORROW:
            return own
        if self.borrow_limit < 0:
            return None
        return own + own * self.borrow_limit // 100


class Attempt(msgspec.Struct, array_like=True, gc=False):
    number: int
    hosts: tuple[str, ...]
    dispatched_at: float
    started_at: float | None = None
    stopped_at: float | None = None
    status_reason: str = ""
    exit_code: int | None = None
    log_tail: str = ""
    start_phases: StartPhases | None = None  # from the report that made the attempt RUNNING
    model_artifacts: str = ""  # s3:// URI of its model.tar.gz, from the host that uploaded it
    # Preempted: the seconds of work its preemption put at risk (the decision's input).
    seconds_at_risk: float | None = None


class Job(msgspec.Struct, array_like=True, gc=False):
    job_id: str
    job_name: str
    queue: str
    share: str
    unit: str
    count: int
    priority: int
    created_at: float
    retry_attempts: int
    evaluate_on_exit: tuple[EvaluateOnExit, ...]
    preemption_retries: int | None
    timeout_seconds: int | None
    keep_alive_seconds: int
    warm_pool_key: WarmPoolKey
    payload: str
    tags: dict[str, str]
    client_token: str | None
    attempt_duration_seconds: int | None = None  # as submitted (timeout_seconds applies)
    service_job_type: str = "SAGEMAKER_TRAINING"
    status: JobStatus = JobStatus.RUNNABLE
    status_reason: str = ""
    is_terminated: bool = False
    attempts_used: int = 1  # retry-strategy count: the first RUNNABLE included
    attempt_no: int = 0  # dispatch counter; the attempt id in node reports
    # Tuples, not lists: a job then holds nothing the cyclic GC tracks (a million jobs
    # used to be three million tracked lists); the fold replaces them, never edits them.
    attempts: tuple[Attempt, ...] = ()
    hosts: tuple[str, ...] = ()
    ended_hosts: tuple[str, ...] = ()
    started: bool = False  # reached STARTING/RUNNING in this attempt
    stop_cause: StopCause | None = None
    stop_reason: str = ""
    failure: FailureClass | None = None
    failure_reason: str = ""
    failure_exit_code: int | None = None
    dispatched_at: float = 0.0
    running_at: float | None = None
    stopped_at: float | None = None
    preempted_count: int = 0
    recent_preemptions: tuple[Attempt, ...] = ()
    chain_id: str = ""
    chain_started_at: float | None = None
    submitted_by: str = ""  # principals recorded on the request events
    priority_updated_by: str = ""
    terminated_by: str = ""
    retained: bool = False  # hosts kept after the end, waiting to become a warm pool
    awaiting_outcome: bool = False  # attempt failed; retry or final failure is decided next
    # The live attempt's newest checkpoint report (never before its dispatch); None: none yet.
    last_checkpoint_at: float | None = None
    # Unit-seconds its preempted attempts lost: units x seconds at risk, summed.
    lost_unit_seconds: float = 0.0

    def order_key(self) -> tuple[int, float, str]:
        """Dispatch order inside a share: priority desc, createdAt asc, jobId."""
        return (-self.priority, self.created_at, self.job_id)

    def queue_entry(self) -> tuple[int, float, str, str]:
        """The job's entry in `State.runnable`: `(*order_key(), job_id)`, built in one go."""
        return (-self.priority, self.created_at, self.job_id, self.job_id)

    def deadline(self) -> float | None:
        if self.timeout_seconds is None or self.running_at is None:
            return None
        return self.running_at + self.timeout_seconds


class Host(msgspec.Struct, array_like=True, gc=False):
    host_id: str
    unit: str
    gpu_count: int
    environment: str | None
    address: str = ""
    status: HostStatus = HostStatus.HEALTHY
    last_heartbeat: float = 0.0
    holder: str | None = None  # job id, or pool (job) id, that holds the host
    holder_env: str | None = None
    # Drained by a request: stays DRAINED when its agent registers again, until undrained.
    drained: bool = False


class WarmPool(msgspec.Struct, array_like=True, gc=False):
    job_id: str
    queue: str
    share: str
    environment: str
    unit: str
    count: int
    key: WarmPoolKey
    status: WarmPoolStatus
    chain_id: str
    chain_started_at: float
    hosts: tuple[str, ...] = ()
    available_since: float | None = None
    expires_at: float | None = None
    reused_by_job: str | None = None
    billable_seconds: int = 0
    termination_reason: str | None = None
    user_terminated: bool = False
    # A keep-alive update the next pass has yet to turn into a new expiry.
    requested_keep_alive: int | None = None
    keep_alive_requested_at: float | None = None
