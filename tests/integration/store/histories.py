"""Recorded histories for the read-model tests, cut into log messages as services append them.

A `Recording` wraps the test `World` (real events, real scheduling pass): every
step's events become one message, and a pass's decisions one message, like the
admission service, node agents and scheduler write them.
"""

from __future__ import annotations

import random

from quartermaster import events as ev
from quartermaster.core.model import TERMINAL_STATUSES, JobStatus
from quartermaster.eventlog import encode_batch, subjects
from quartermaster.store import Batch
from quartermaster.testing.builders import JobSpec, World, a_job

UNIT = "ml.g5.xlarge"
Message = tuple[str, list[ev.Event]]  # subject kind ("reports:<host>" for a host), events


class Recording:
    def __init__(self) -> None:
        self.w = World()
        self.messages: list[Message] = []
        self._cut = 0

    def cut(self, kind: str = "requests") -> Recording:
        """Close the current message: everything logged since the last cut.

        Split as the producers write them (readers fold an event only from its own
        subject): reports one message per host, host losses apart from job decisions.
        """
        new = self.w.log[self._cut :]
        self._cut = len(self.w.log)
        for part_kind, events in _split(kind, new):
            self.messages.append((part_kind, events))
        return self

    def pass_(self) -> list[ev.Event]:
        self.cut()
        decided = self.w.pass_()
        self.cut("decisions")
        return decided

    def submit(self, spec: JobSpec, job_id: str | None = None) -> str:
        self.cut()
        job_id = self.w.submit(spec, job_id)
        self.cut()
        return job_id

    def report(self, step: World) -> Recording:
        """Cut the events a World helper (start, succeed, ...) just logged as one report."""
        del step
        return self.cut("reports")

    def batches(self, from_message: int = 0) -> list[Batch]:
        """The messages as (seq, subject, events), numbered from 1 like a fresh stream."""
        return [
            Batch(i + 1, subject_of(kind), list(events))  # type: ignore[arg-type]
            for i, (kind, events) in enumerate(self.messages)
            if i >= from_message
        ]


def _split(kind: str, events: list[ev.Event]) -> list[Message]:
    parts: list[Message] = []
    for event in events:
        part_kind = kind
        if kind == "reports":
            part_kind = f"reports:{getattr(event, 'host_id', None) or getattr(event, 'host', '')}"
        elif kind == "decisions" and isinstance(event, ev.HostLost):
            part_kind = "hosts"
        if parts and parts[-1][0] == part_kind:
            parts[-1][1].append(event)
        else:
            parts.append((part_kind, [event]))
    return parts


def subject_of(kind: str, prefix: str = "qm") -> str:
    if kind == "decisions":
        return subjects.decisions("q", prefix)
    if kind == "hosts":
        return subjects.host_decisions(prefix)
    if kind == "timers":
        return subjects.timers(prefix)
    if kind.startswith("reports:"):
        return subjects.reports(kind.removeprefix("reports:"), prefix)
    return subjects.requests(prefix)


async def append_all(event_log: object, messages: list[Message]) -> int:
    """Append messages to a JetStreamLog as envelopes; return the last seq."""
    items = [
        (subject_of(kind, event_log.prefix), encode_batch(events), None)  # type: ignore[attr-defined]
        for kind, events in messages
    ]
    seqs = await event_log.append_batch(items)  # type: ignore[attr-defined]
    return int(seqs[-1])


def configured() -> Recording:
    """3 hosts; QS1 LEND_AND_BORROW (borrow 200, in-share preemption), QS2 LEND, QS3 RESERVE."""
    r = Recording()
    r.w.environment(ml_g5_xlarge=3)
    r.cut()
    r.w.queue()
    r.cut()
    r.w.share("QS1", 1, "LEND_AND_BORROW", borrow_limit=200, preemption=True)
    r.w.share("QS2", 1, "LEND")
    r.w.share("QS3", 1, "RESERVE")
    r.cut()
    r.w.hosts(3)
    r.cut("reports")
    return r


def seed_history() -> Recording:
    """The seed scenario, then warm pools, a retry, a termination, a host loss, a misfit."""
    r = configured()
    w = r.w
    for name, prio in (("high", 3), ("med", 2), ("low", 1)):
        r.submit(a_job(name=name, priority=prio).in_share("QS1"))
    r.pass_()
    r.report(w.start("high").start("med"))
    r.submit(a_job(name="qs2_job_1", priority=1).in_share("QS2"))
    r.pass_()  # reclaim: med is preempted
    r.report(w.confirm_stop("med"))
    r.pass_()
    r.report(w.start("qs2_job_1"))
    w.set_priority("low", 4)
    r.cut()
    r.pass_()  # in-share preemption of high
    r.report(w.confirm_stop("high"))
    r.pass_()
    r.report(w.start("low"))

    # Warm pools in QS3: warm1 leaves a pool, warm2 reuses it, its own pool expires.
    r.submit(a_job(name="warm1", keep_alive=600).in_share("QS3"))
    r.pass_()
    r.report(w.start("warm1"))
    w.tick(5)
    r.cut("timers")
    r.report(w.succeed("warm1"))
    r.pass_()  # warm1's pool is Available
    w.tick(30)
    r.cut("timers")
    r.submit(a_job(name="warm2", keep_alive=60).in_share("QS3"))
    r.pass_()  # warm2 takes warm1's pool
    r.report(w.start("warm2"))
    r.report(w.succeed("warm2"))
    r.pass_()
    w.tick(120)
    r.cut("timers")
    r.pass_()  # warm2's pool expires

    # A retried job in QS3, then a job terminated while it waits in QS2.
    r.submit(a_job(name="flaky", attempts=2).in_share("QS3"))
    r.pass_()
    r.report(w.start("flaky"))
    r.report(w.fail("flaky", reason="AlgorithmError: boom", exit_code=3))
    r.pass_()  # retried, dispatched again
    r.report(w.start("flaky"))
    r.report(w.succeed("flaky"))
    r.pass_()
    r.submit(a_job(name="doomed", priority=7).in_share("QS2"))
    r.pass_()
    w.terminate("doomed", "no longer needed")
    r.cut()
    r.pass_()

    # A host is lost under a running job; a job that can never fit.
    w.apply(ev.HostHeartbeat(at=w.clock, host_id="h1"))
    r.cut("reports")
    w.lose_host("h2")
    r.cut("decisions")
    r.pass_()
    r.submit(a_job(name="huge", count=5, priority=9).in_share("QS1"))
    r.pass_()
    return r


STEPS = (
    *("submit", "submit", "submit", "start", "finish", "finish", "confirm", "priority"),
    *("terminate", "lose", "register", "limit", "tick", "heartbeat", "delete_share"),
)


def random_history(seed: int, steps: int = 60) -> Recording:
    """A seeded random walk over submissions, reports, losses and limit changes."""
    rng = random.Random(seed)
    r = Recording()
    w = r.w
    w.environment(ml_g5_xlarge=5)
    w.queue()
    shares = [("A", "LEND_AND_BORROW", 100), ("B", "LEND", -1), ("C", "RESERVE", -1)]
    for name, strategy, borrow in shares:
        w.share(
            name, 2 if name != "C" else 1, strategy, borrow_limit=borrow, preemption=name == "A"
        )
    r.cut()
    w.hosts(5)
    r.cut("reports")
    r.pass_()

    def live(*statuses: JobStatus) -> list[str]:
        return sorted(
            j.job_id
            for j in w.state.jobs.values()
            if j.status in statuses and j.hosts and not j.awaiting_outcome and not j.stop_cause
        )

    for n in range(steps):
        step = rng.choice(STEPS)
        if step == "submit":
            w.clock += 0.5
            count = rng.choice([1, 1, 2])
            role = rng.choice(["r1", "r2"])
            share = rng.choice([s[0] for s in shares])
            r.submit(
                a_job(
                    name=f"j{n}",
                    share=share,
                    priority=rng.randint(0, 5),
                    count=count,
                    keep_alive=rng.choice([0, 60]),
                    attempts=rng.randint(1, 3),
                    key=ev.WarmPoolKey(role_arn=role, instance_type=UNIT, instance_count=count),
                ),
                job_id=f"job-{n:03d}",
            )
        elif step == "start" and (jobs := live(JobStatus.SCHEDULED)):
            r.report(w.start(rng.choice(jobs)))
        elif step == "finish" and (jobs := live(JobStatus.RUNNING)):
            job_id = rng.choice(jobs)
            outcome = rng.choice(["ok", "algo", "infra"])
            if outcome == "ok":
                r.report(w.succeed(job_id))
            else:
                cls = (
                    ev.FailureClass.ALGORITHM_ERROR
                    if outcome == "algo"
                    else ev.FailureClass.INFRASTRUCTURE_ERROR
                )
                r.report(w.fail(job_id, reason=f"{outcome} failure", failure_class=cls))
        elif step == "confirm":
            r.report(w.confirm_all_stops())
        elif step == "priority" and w.state.jobs:
            job_id = rng.choice(sorted(w.state.jobs))
            w.set_priority(job_id, rng.randint(0, 9))
            r.cut()
        elif step == "terminate":
            alive = sorted(
                j for j, job in w.state.jobs.items() if job.status not in TERMINAL_STATUSES
            )
            if alive:
                w.terminate(rng.choice(alive), "user")
                r.cut()
        elif step == "lose":
            w.lose_host(f"h{rng.randint(1, 5)}")
            r.cut("decisions")
        elif step == "register":
            host = w.state.hosts.get(f"h{rng.randint(1, 5)}")
            if host is not None and host.status.value != "HEALTHY" and host.holder is None:
                w.apply(ev.HostRegistered(at=w.clock, host_id=host.host_id, instance_type=UNIT))
                r.cut("reports")
        elif step == "limit":
            name, strategy, borrow = rng.choice(shares[:2])
            w.share(
                name,
                rng.randint(0, 3),
                strategy,
                borrow_limit=borrow,
                preemption=name == "A",
                updated=True,
            )
            r.cut()
        elif step == "tick":
            w.tick(rng.choice([1, 30, 61, 200]))
            r.cut("timers")
        elif step == "heartbeat":
            w.apply(ev.HostHeartbeat(at=w.clock, host_id=f"h{rng.randint(1, 5)}"))
            r.cut("reports")
        elif step == "delete_share" and rng.random() < 0.3:
            w.apply(ev.QuotaShareDeleted(at=w.clock, job_queue="q", name="D"))
            w.share("D", 1, "LEND")
            r.cut()
        r.pass_()
    return r
