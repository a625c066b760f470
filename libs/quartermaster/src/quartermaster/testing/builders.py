"""Small builders for given/when/then tests of the core: `a_job(priority=3).in_share("QS1")`.

A `World` wraps a State and a clock; every helper folds a real event, and
`pass_()` runs the scheduling pass to its fixpoint, folding its decisions.
"""

from __future__ import annotations

import json

import msgspec

from quartermaster import events as ev
from quartermaster.core import PassPolicy, State, fold, settle
from quartermaster.core.model import Job, JobStatus


class JobSpec(msgspec.Struct):
    name: str = "job"
    share: str = "QS1"
    queue: str = "q"
    priority: int = 0
    unit: str = "ml.g5.xlarge"
    count: int = 1
    attempts: int = 1
    evaluate_on_exit: tuple[ev.EvaluateOnExit, ...] = ()
    preemption_retries: int | None = None
    timeout: int | None = None
    keep_alive: int = 0
    key: ev.WarmPoolKey | None = None

    def in_share(self, share: str) -> JobSpec:
        return msgspec.structs.replace(self, share=share)

    def named(self, name: str) -> JobSpec:
        return msgspec.structs.replace(self, name=name)


def a_job(**fields: object) -> JobSpec:
    return JobSpec(**fields)  # type: ignore[arg-type]


class World:
    """A state, a clock, and helpers that fold the events a real system would log."""

    def __init__(self, policy: PassPolicy | None = None) -> None:
        self.state = State()
        self.clock = 1_000.0
        self.policy = policy or PassPolicy()
        self.log: list[ev.Event] = []
        self.decisions: list[ev.Event] = []

    # ---- time and raw events ---------------------------------------------
    def tick(self, seconds: float = 1.0) -> World:
        self.clock += seconds
        return self.apply(ev.ClockTicked(at=self.clock))

    def apply(self, event: ev.Event) -> World:
        self.log.append(event)
        fold(self.state, event)
        return self

    def pass_(self) -> list[ev.Event]:
        decided = settle(self.state, self.policy)
        self.log.extend(decided)
        self.decisions = decided
        return decided

    # ---- configuration ------------------------------------------------------
    def environment(self, name: str = "env", **units: int) -> World:
        limits = tuple(ev.CapacityLimit(u.replace("_", "."), n) for u, n in units.items())
        return self.apply(
            ev.ServiceEnvironmentCreated(at=self.clock, name=name, capacity_limits=limits)
        )

    def queue(self, name: str = "q", environment: str = "env") -> World:
        self.apply(ev.SchedulingPolicyCreated(at=self.clock, name="fifo"))
        return self.apply(
            ev.JobQueueCreated(
                at=self.clock, name=name, service_environment=environment, scheduling_policy="fifo"
            )
        )

    def share(
        self,
        name: str,
        limit: int,
        strategy: str = "LEND_AND_BORROW",
        borrow_limit: int = -1,
        preemption: bool = False,
        queue: str = "q",
        unit: str = "ml.g5.xlarge",
        updated: bool = False,
    ) -> World:
        cls = ev.QuotaShareUpdated if updated else ev.QuotaShareCreated
        return self.apply(
            cls(
                at=self.clock,
                job_queue=queue,
                name=name,
                capacity_limits=(ev.CapacityLimit(unit, limit),),
                strategy=ev.SharingStrategy(strategy),
                borrow_limit=borrow_limit,
                in_share_preemption=ev.State.ENABLED if preemption else ev.State.DISABLED,
            )
        )

    def hosts(self, n: int, unit: str = "ml.g5.xlarge", prefix: str = "h") -> World:
        for i in range(1, n + 1):
            self.apply(ev.HostRegistered(at=self.clock, host_id=f"{prefix}{i}", instance_type=unit))
        return self

    # ---- jobs --------------------------------------------------------------
    def submit(self, spec: JobSpec, job_id: str | None = None) -> str:
        job_id = job_id or spec.name
        self.clock += 0.001  # createdAt orders FIFO; keep it strictly increasing
        key = spec.key or ev.WarmPoolKey(instance_type=spec.unit, instance_count=spec.count)
        self.apply(
            ev.JobSubmitted(
                at=self.clock,
                job_id=job_id,
                job_name=spec.name,
                job_queue=spec.queue,
                quota_share=spec.share,
                instance_type=spec.unit,
                instance_count=spec.count,
                scheduling_priority=spec.priority,
                retry_attempts=spec.attempts,
                evaluate_on_exit=spec.evaluate_on_exit,
                preemption_retries=spec.preemption_retries,
                attempt_duration_seconds=spec.timeout,
                keep_alive_seconds=spec.keep_alive,
                warm_pool_key=key,
            )
        )
        return job_id

    def job(self, job_id: str) -> Job:
        return self.state.jobs[job_id]

    def status(self, job_id: str) -> JobStatus:
        return self.state.jobs[job_id].status

    def set_priority(self, job_id: str, priority: int) -> World:
        return self.apply(
            ev.JobPriorityUpdated(at=self.clock, job_id=job_id, scheduling_priority=priority)
        )

    def terminate(self, job_id: str, reason: str = "user request") -> World:
        return self.apply(ev.JobTerminationRequested(at=self.clock, job_id=job_id, reason=reason))

    # ---- node agent reports -----------------------------------------------
    def _each_host(self, job_id: str, make: type[ev.Event], **fields: object) -> World:
        job = self.job(job_id)
        for host in job.hosts:
            if host not in job.ended_hosts:
                report = make(
                    at=self.clock, job_id=job_id, attempt=job.attempt_no, host=host, **fields
                )  # type: ignore[call-arg]
                self.apply(report)
        return self

    def start(self, job_id: str) -> World:
        self._each_host(job_id, ev.JobStarting)
        return self._each_host(job_id, ev.JobRunning)

    def succeed(self, job_id: str) -> World:
        return self._each_host(job_id, ev.JobSucceeded)

    def fail(
        self,
        job_id: str,
        reason: str = "AlgorithmError: exit 1",
        failure_class: ev.FailureClass = ev.FailureClass.ALGORITHM_ERROR,
        exit_code: int | None = 1,
    ) -> World:
        job = self.job(job_id)
        host = job.hosts[0]
        return self.apply(
            ev.JobFailed(
                at=self.clock,
                job_id=job_id,
                attempt=job.attempt_no,
                host=host,
                reason=reason,
                failure_class=failure_class,
                exit_code=exit_code,
            )
        )

    def confirm_stop(self, job_id: str) -> World:
        return self._each_host(job_id, ev.JobStopConfirmed)

    def confirm_all_stops(self) -> World:
        for job in list(self.state.jobs.values()):
            if job.stop_cause is not None and job.hosts and not job.awaiting_outcome:
                self.confirm_stop(job.job_id)
        return self

    def lose_host(self, host_id: str) -> World:
        return self.apply(ev.HostLost(at=self.clock, host_id=host_id))

    # ---- reading decisions ---------------------------------------------------
    def dispatched(self) -> dict[str, tuple[str, ...]]:
        return {d.job_id: d.hosts for d in self.decisions if isinstance(d, ev.JobDispatched)}

    def preempted(self) -> list[str]:
        return [d.job_id for d in self.decisions if isinstance(d, ev.JobPreemptionRequested)]


def dispatched_job(payload: object, *, hosts: int = 1, job_id: str = "j") -> Job:
    """A training job with this request payload (a JSON string, or anything JSON encodes),
    dispatched to `hosts` hosts `h1`..: what a node agent launches, for its tests and
    benchmarks."""
    w = World().environment(ml_g5_xlarge=max(4, hosts)).queue().hosts(hosts)
    w.share("QS1", max(4, hosts), "LEND_AND_BORROW")
    w.apply(
        ev.JobSubmitted(
            at=w.clock,
            job_id=job_id,
            job_name=job_id,
            job_queue="q",
            quota_share="QS1",
            instance_type="ml.g5.xlarge",
            instance_count=hosts,
            payload=payload if isinstance(payload, str) else json.dumps(payload),
        )
    )
    w.pass_()
    return w.job(job_id)
