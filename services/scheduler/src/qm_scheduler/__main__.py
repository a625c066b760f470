"""`python -m qm_scheduler`: the scheduler's composition root."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from qm_scheduler import identity
from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from quartermaster import telemetry
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import process
from quartermaster.metrics import LogLagCollector, SchedulerMetrics, StateCollector, serving


async def run(s: SchedulerSettings, event_log: JetStreamLog) -> None:
    """The scheduler, and its `/metrics` (the state-derived gauges too) when a port is set."""
    registry = CollectorRegistry()
    scheduler = Scheduler(s, event_log, SchedulerMetrics(registry))

    def folded() -> dict[str, int]:
        return {} if scheduler.follower is None else {"scheduler": scheduler.follower.seq}

    registry.register(
        StateCollector(lambda: None if scheduler.follower is None else scheduler.follower.state)
    )
    registry.register(LogLagCollector(event_log.last_seq, folded))
    with serving(registry, s.metrics_port, s.metrics_host):
        await scheduler.run()


def main() -> None:
    with (
        telemetry.running("qm-scheduler", "QM_SCHEDULER_"),
        identity.claim(SchedulerSettings.from_env()) as s,
    ):
        process.main(process.serve(s, "qm-scheduler", lambda event_log: run(s, event_log)))


if __name__ == "__main__":
    main()
