"""A realistic history, written by the real pass over simulated time: what the
fold benchmark folds (bench/core_bench.py) and what tests fold to check that the
fold's deferred index changes read as eager ones would.

1000 hosts, 20 quota shares, jobs arriving a little faster than they finish. Every
second: the arrivals (JobSubmitted), the node agents' reports due (JobStarting and
JobRunning a second after dispatch, JobSucceeded or JobFailed when the attempt ends),
a ClockTicked, then the pass to its fixpoint (dispatches, retries, preemptions and
stop confirmations, warm pools opened, taken and expired). A third of the jobs keep
their hosts warm, one in ten runs on two hosts, one in twenty fails its first attempt
(and is retried); every job has a runtime limit (a deadline while it runs). No
randomness: the same arguments give the same log.
"""

from __future__ import annotations

import collections

from quartermaster import events as ev
from quartermaster.core import State, decide, fold
from quartermaster.core.incremental import PassMemo

UNIT = "ml.g5.xlarge"
STRATEGIES = ["LEND_AND_BORROW", "LEND", "RESERVE", "LEND_AND_BORROW"]
WARM_KEY = ev.WarmPoolKey(role_arn="arn:aws:iam::1:role/train", instance_type=UNIT)


def config(shares: int, hosts: int) -> list[ev.Event]:
    log: list[ev.Event] = [
        ev.ServiceEnvironmentCreated(
            at=0, name="env", capacity_limits=(ev.CapacityLimit(UNIT, hosts),)
        ),
        ev.SchedulingPolicyCreated(at=0, name="fifo"),
        ev.JobQueueCreated(at=0, name="q", service_environment="env", scheduling_policy="fifo"),
    ]
    for s in range(shares):
        log.append(
            ev.QuotaShareCreated(
                at=0,
                job_queue="q",
                name=f"s{s:02d}",
                capacity_limits=(ev.CapacityLimit(UNIT, hosts // shares),),
                strategy=ev.SharingStrategy(STRATEGIES[s % 4]),
                borrow_limit=100,
                in_share_preemption=ev.State.ENABLED,
            )
        )
    log += [ev.HostRegistered(at=0, host_id=f"h{i:05d}", instance_type=UNIT) for i in range(hosts)]
    return log


def submitted(j: int, at: float, shares: int) -> ev.JobSubmitted:
    warm = j % 3 == 0
    return ev.JobSubmitted(
        at=at,
        job_id=f"j{j:07d}",
        job_name="bench",
        job_queue="q",
        quota_share=f"s{(j * 7) % shares:02d}",
        instance_type=UNIT,
        instance_count=2 if j % 10 == 9 else 1,
        scheduling_priority=(j * 31) % 10,
        retry_attempts=2,
        max_runtime_seconds=24 * 3600,  # SageMaker's StoppingCondition: every job has one
        keep_alive_seconds=30 if warm else 0,
        warm_pool_key=WARM_KEY if warm else ev.WarmPoolKey(),
        payload='{"TrainingJobName": "bench", "AlgorithmSpecification": {"TrainingImage": "x"}}',
        tags={"team": f"t{j % 5}"},
        client_token=f"tok-{j}",
        principal="alice",
    )


def realistic_log(jobs: int, shares: int = 20, hosts: int = 1000) -> list[ev.Event]:
    """The log of `jobs` jobs run to the end (their warm pools expired too)."""
    state = State()
    log: list[ev.Event] = []
    due: dict[int, list[ev.Event]] = collections.defaultdict(list)  # second -> reports

    def add(event: ev.Event) -> None:
        fold(state, event)
        log.append(event)

    for event in config(shares, hosts):
        add(event)
    memo = PassMemo()
    arrivals_per_second = 260  # 1000 hosts / about 4.6 s a job, plus a growing backlog
    next_job = 0
    second = 1
    failed_once: set[str] = set()
    while next_job < jobs or due or any(state.runnable.values()) or state.pool_expiries:
        at = float(second)
        for _ in range(min(arrivals_per_second, jobs - next_job)):
            add(submitted(next_job, at + next_job % 100 * 1e-3, shares))
            next_job += 1
        for report in due.pop(second, []):
            add(report)
        add(ev.ClockTicked(at=at + 0.5))
        while decisions := decide(state, memo=memo):
            for decision in decisions:
                add(decision)
                if isinstance(decision, ev.JobDispatched):
                    _reports(decision, second, due, failed_once)
                elif isinstance(decision, ev.JobPreemptionRequested):
                    stopping = state.jobs[decision.job_id].hosts
                    due[second + 1] += [
                        ev.JobStopConfirmed(
                            at=second + 1,
                            job_id=decision.job_id,
                            attempt=decision.attempt,
                            host=host,
                            exit_code=143,
                        )
                        for host in stopping
                    ]
        second += 1
    return log


def _reports(
    d: ev.JobDispatched, second: int, due: dict[int, list[ev.Event]], failed_once: set[str]
) -> None:
    """What the attempt's hosts report: started a second later, ended 2-8 s after that."""
    number = int(d.job_id[1:])
    start = second + 1
    end = start + 2 + (number * 13) % 7
    fails = number % 20 == 7 and d.job_id not in failed_once
    if fails:
        failed_once.add(d.job_id)
    phases = ev.StartPhases(container_s=0.2, warm=d.warm_pool is not None)
    for host in d.hosts:
        due[start].append(ev.JobStarting(at=start, job_id=d.job_id, attempt=d.attempt, host=host))
        due[start].append(
            ev.JobRunning(
                at=start + 0.2,
                job_id=d.job_id,
                attempt=d.attempt,
                host=host,
                start_phases=phases,
            )
        )
        if fails:
            due[end].append(
                ev.JobFailed(
                    at=end,
                    job_id=d.job_id,
                    attempt=d.attempt,
                    host=host,
                    reason="exit 1",
                    exit_code=1,
                    log_tail="Traceback (most recent call last): ...",
                )
            )
        else:
            due[end].append(ev.JobSucceeded(at=end, job_id=d.job_id, attempt=d.attempt, host=host))
