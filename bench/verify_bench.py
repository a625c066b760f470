"""Verify a generated 100k-event log; print events/s (min/median/max over several runs).

Usage: python bench/verify_bench.py [--events 100000] [--runs 5] [--seed 3]

The log is made by the real core: a queue of four quota shares (every strategy,
borrow limits, in-share preemption) on 48 hosts; jobs of 1-4 instances arrive,
start, succeed or fail (retries, evaluateOnExit), time out, are preempted and
confirm their stops, take warm pools, change priority, are terminated; hosts
heartbeat and a clock ticks. After each input the pass runs to its fixpoint and
its decisions are recorded, as the scheduler would append them. The figure is
`qm audit verify --from-file` on the JSONL export (read, decode, fold, re-run
the pass at every decision message, the cyclic GC paused); the in-memory figure
(GC on) leaves out the file; then the same file on several processes.
Goal: >= 50k events/s. Arrivals pause while 96 jobs wait, as on a busy cluster
whose backlog is bounded; `--heartbeats` sets how many heartbeats fall between
two job steps (a production log is mostly heartbeats; the default keeps it
job-heavy).
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from quartermaster import events as ev
from quartermaster.audit import Report, verify, write_log
from quartermaster.audit.envelope import Envelope
from quartermaster.audit.logfile import from_batches
from quartermaster.audit.parallel import default_workers, verify_file
from quartermaster.core import State, decide, fold
from quartermaster.core.model import JobStatus

UNIT = "ml.g5.xlarge"
HOSTS = 48
BACKLOG = 96  # RUNNABLE jobs at most: arrivals pause while this many wait
SHARES = (
    ("research", 16, "LEND_AND_BORROW", 100, True),
    ("product", 16, "LEND", -1, False),
    ("batch", 8, "LEND_AND_BORROW", -1, False),
    ("oncall", 8, "RESERVE", -1, False),
)


class History:
    """A random history through the real core, recorded as batches (inputs and passes)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.state = State()
        self.clock = 1_700_000_000.0
        self.batches: list[list[ev.Event]] = []
        self.events = 0
        self.n = 0
        self.record(self._setup())

    def _setup(self) -> list[ev.Event]:
        at = self.clock
        out: list[ev.Event] = [
            ev.ServiceEnvironmentCreated(
                at=at, name="env", capacity_limits=(ev.CapacityLimit(UNIT, HOSTS),)
            ),
            ev.SchedulingPolicyCreated(at=at, name="fifo"),
            ev.JobQueueCreated(
                at=at, name="q", service_environment="env", scheduling_policy="fifo"
            ),
        ]
        for name, limit, strategy, borrow, preempt in SHARES:
            out.append(
                ev.QuotaShareCreated(
                    at=at,
                    job_queue="q",
                    name=name,
                    capacity_limits=(ev.CapacityLimit(UNIT, limit),),
                    strategy=ev.SharingStrategy(strategy),
                    borrow_limit=borrow,
                    in_share_preemption=ev.State.ENABLED if preempt else ev.State.DISABLED,
                )
            )
        out += [
            ev.HostRegistered(at=at, host_id=f"h{i:03d}", instance_type=UNIT) for i in range(HOSTS)
        ]
        return out

    def record(self, batch: list[ev.Event]) -> None:
        if not batch:
            return
        for event in batch:
            fold(self.state, event)
        self.batches.append(batch)
        self.events += len(batch)

    def settle(self) -> None:
        while decisions := decide(self.state):
            self.record(decisions)

    def jobs(self, *statuses: JobStatus) -> list[str]:
        return sorted(
            j.job_id
            for j in self.state.jobs.values()
            if j.status in statuses and j.hosts and not j.awaiting_outcome
        )

    # ---- inputs -------------------------------------------------------------
    def step(self, heartbeats: float) -> None:
        """One input and the pass after it; `heartbeats` per step on average between them."""
        for _ in range(int(heartbeats) + (self.rng.random() < heartbeats % 1)):
            self.clock += self.rng.expovariate(8.0)
            self.beat()
        self.clock += self.rng.expovariate(4.0)
        action = self.rng.choices(
            ["submit", "start", "finish", "stops", "priority", "terminate", "tick"],
            [30, 25, 20, 8, 3, 1, 5],
        )[0]
        if action == "submit" and len(self.runnable()) >= BACKLOG:
            action = "finish"  # a backlog as a busy cluster has, not one growing without end
        getattr(self, action)()
        self.settle()

    def runnable(self) -> list[str]:
        return [j for j in self.state.jobs.values() if j.status is JobStatus.RUNNABLE]

    def submit(self) -> None:
        self.n += 1
        share = self.rng.choice(SHARES)[0]
        count = self.rng.choice((1, 1, 1, 2, 4))
        keep = self.rng.choice((0, 0, 0, 300))
        role = self.rng.choice(("r1", "r2"))
        self.record(
            [
                ev.JobSubmitted(
                    at=self.clock,
                    job_id=f"j{self.n}",
                    job_name=f"job-{self.n}",
                    job_queue="q",
                    quota_share=share,
                    instance_type=UNIT,
                    instance_count=count,
                    scheduling_priority=self.rng.randint(0, 9),
                    retry_attempts=self.rng.choice((1, 2, 3)),
                    attempt_duration_seconds=self.rng.choice((None, None, None, 120)),
                    keep_alive_seconds=keep,
                    warm_pool_key=ev.WarmPoolKey(
                        role_arn=role, instance_type=UNIT, instance_count=count
                    ),
                )
            ]
        )

    def start(self) -> None:
        jobs = [j for j in self.jobs(JobStatus.SCHEDULED) if not self.state.jobs[j].stop_cause]
        if jobs:
            job = self.state.jobs[self.rng.choice(jobs)]
            at, n = self.clock, job.attempt_no
            for host in job.hosts:  # each host reports on its own subject
                self.record(
                    [
                        ev.JobStarting(at=at, job_id=job.job_id, attempt=n, host=host),
                        ev.JobRunning(at=at, job_id=job.job_id, attempt=n, host=host),
                    ]
                )

    def finish(self) -> None:
        jobs = self.jobs(JobStatus.RUNNING)
        if not jobs:
            return
        job = self.state.jobs[self.rng.choice(jobs)]
        outcome = self.rng.choices(["ok", "algo", "infra"], [80, 15, 5])[0]
        for host in list(job.hosts):
            if host in job.ended_hosts:
                continue
            at, n = self.clock, job.attempt_no
            if outcome == "ok":
                self.record([ev.JobSucceeded(at=at, job_id=job.job_id, attempt=n, host=host)])
            else:
                cls = ev.FailureClass.ALGORITHM_ERROR
                if outcome == "infra":
                    cls = ev.FailureClass.INFRASTRUCTURE_ERROR
                self.record(
                    [
                        ev.JobFailed(
                            at=at,
                            job_id=job.job_id,
                            attempt=n,
                            host=host,
                            reason=f"{outcome} failure",
                            failure_class=cls,
                            exit_code=1,
                        )
                    ]
                )

    def stops(self) -> None:
        for job in sorted(self.state.jobs.values(), key=lambda j: j.job_id):
            if job.stop_cause is not None and job.hosts and not job.awaiting_outcome:
                for host in job.hosts:
                    if host not in job.ended_hosts:
                        self.record(
                            [
                                ev.JobStopConfirmed(
                                    at=self.clock,
                                    job_id=job.job_id,
                                    attempt=job.attempt_no,
                                    host=host,
                                )
                            ]
                        )

    def _live(self) -> list[str]:
        return sorted(
            j.job_id
            for j in self.state.jobs.values()
            if j.status not in (JobStatus.SUCCEEDED, JobStatus.FAILED)
        )

    def priority(self) -> None:
        if live := self._live():
            job_id = self.rng.choice(live)
            priority = self.rng.randint(0, 9)
            self.record(
                [ev.JobPriorityUpdated(at=self.clock, job_id=job_id, scheduling_priority=priority)]
            )

    def terminate(self) -> None:
        if live := self._live():
            job_id = self.rng.choice(live)
            self.record([ev.JobTerminationRequested(at=self.clock, job_id=job_id, reason="user")])

    def beat(self) -> None:
        host = f"h{self.rng.randrange(HOSTS):03d}"
        self.record([ev.HostHeartbeat(at=self.clock, host_id=host)])

    def tick(self) -> None:
        self.clock += self.rng.choice((1, 30, 150))
        self.record([ev.ClockTicked(at=self.clock)])


def generate(events: int, seed: int, heartbeats: float) -> list[Envelope]:
    history = History(seed)
    while history.events < events:
        history.step(heartbeats)
    return list(from_batches(history.batches))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument(
        "--heartbeats",
        type=float,
        default=1.0,
        help="host heartbeats per job step (48 hosts beating every 5 s with 10-minute jobs "
        "give about 10; 1 keeps the log job-heavy)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    log = generate(args.events, args.seed, args.heartbeats)
    events = sum(len(e.events) for e in log)
    kinds: dict[str, int] = {}
    for envelope in log:
        for event in envelope.events:
            kinds[ev.tag_of(event)] = kinds.get(ev.tag_of(event), 0) + 1
    print(
        f"generated {events} events in {len(log)} messages in {time.perf_counter() - started:.1f} s"
    )
    print("  " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])))
    gc.collect()
    gc.freeze()  # the generated history lives to the end: keep full collections off it
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.jsonl"
        write_log(path, log)
        print(f"  JSONL export: {path.stat().st_size / 1e6:.1f} MB")
        ways: list[tuple[str, Callable[[], Report]]] = [
            (
                "from the JSONL file (qm audit verify --from-file --workers 1)",
                lambda: verify_file(path),
            ),
            ("in memory", lambda: verify(log)),
        ]
        for workers in sorted({2, default_workers()} - {1}):
            ways.append(
                (
                    f"from the file, {workers} processes",
                    lambda w=workers: verify_file(path, None, w),
                )
            )
        for name, run in ways:
            rates = []
            for _ in range(args.runs):
                began = time.perf_counter()
                report = run()
                rates.append(events / (time.perf_counter() - began))
                assert report.ok, report.differences[:3]
            print(
                f"verify {name}: events/s min/median/max "
                f"{min(rates):,.0f}/{statistics.median(rates):,.0f}/{max(rates):,.0f} "
                f"({report.decision_messages} decision messages, {report.passes} passes re-run)"
            )


if __name__ == "__main__":
    main()
