"""The scheduler's counters against a real nats-server: each appended decision counts once."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from test_scheduler_service import UNIT, append, running, seed, settings, until

from qm_scheduler.service import Scheduler
from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.core.model import JobStatus
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.events import AnyEvent
from quartermaster.metrics import SchedulerMetrics


async def test_decisions_appended_counts_each_decision_on_the_log_once(
    jetstream_log: JetStreamLog,
) -> None:
    """A settle of several passes (a retry, then its dispatch) counts each decision once."""
    await seed(jetstream_log, hosts=1)
    on_log: list[AnyEvent] = []
    decision_subject = subjects.decisions("q", jetstream_log.prefix)

    def keep(seq: int, subject: str, events: list[AnyEvent]) -> None:
        if subject == decision_subject:
            on_log.extend(events)

    watcher = LogFollower(jetstream_log)
    watcher.listen(keep)
    await watcher.start()
    registry = CollectorRegistry()
    scheduler = Scheduler(settings("s1"), jetstream_log, SchedulerMetrics(registry))
    job = ev.JobSubmitted(
        at=2,
        job_id="j",
        job_name="j",
        job_queue="q",
        quota_share="A",
        instance_type=UNIT,
        retry_attempts=3,
    )

    def attempt() -> int:
        found = watcher.state.jobs.get("j")
        return found.attempt_no if found is not None and found.hosts else 0

    async with running(scheduler):
        await append(jetstream_log, job)
        for number in (1, 2):
            await until(lambda n=number: attempt() == n)  # type: ignore[misc]
            failed = ev.JobFailed(
                at=3 + number, job_id="j", attempt=number, host="h0", reason="AlgorithmError: 1"
            )
            await jetstream_log.append(
                subjects.reports("h0", jetstream_log.prefix), encode_batch([failed])
            )
        await until(lambda: attempt() == 3)
        await until(lambda: scheduler.decisions_appended >= len(on_log))
    await watcher.stop()

    kinds = [type(e).__name__ for e in on_log]
    assert kinds.count("JobRetried") == 2 and kinds.count("JobDispatched") == 3
    assert watcher.state.jobs["j"].status is JobStatus.SCHEDULED
    assert scheduler.decisions_appended == len(on_log)
    counted = sum(
        s.value
        for metric in registry.collect()
        if metric.name == "quartermaster_decisions_appended"
        for s in metric.samples
        if s.name.endswith("_total")
    )
    assert counted == len(on_log)
