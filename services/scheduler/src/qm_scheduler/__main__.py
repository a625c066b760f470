"""`python -m qm_scheduler`: the scheduler's composition root."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from qm_scheduler import identity
from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from quartermaster import health, telemetry
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import process
from quartermaster.metrics import LogLagCollector, SchedulerMetrics, StateCollector, serving


def health_checks(scheduler: Scheduler, max_lag_seconds: float) -> health.Health:
    """Live: its fold and lease loops run. Ready: on the bus, caught up, leading or
    standing by (both are ready; the detail says which)."""
    checks = health.Health()

    def leadership() -> health.Verdict:
        lease = scheduler.leadership
        if lease is None or not lease.running:
            return health.failing("lease thread not running")
        return health.passing(scheduler.role())

    def reader() -> asyncio.Task[None] | None:
        return None if scheduler.follower is None else scheduler.follower.reader

    def relay() -> asyncio.Task[None] | None:
        return None if scheduler.relay is None else scheduler.relay.task

    checks.live("follower", health.running(reader, "log follower"))
    checks.live("leadership", leadership)
    if scheduler.settings.relay_host_feeds:  # a relay that ended publishes no view again
        checks.live("host relay", health.running(relay, "host view relay"))
    checks.ready("nats", health.connected(lambda: scheduler.log.nc.is_connected))
    checks.ready(
        "log",
        health.caught_up(
            lambda: 0 if scheduler.follower is None else scheduler.follower.seq,
            scheduler.log.last_seq,
            max_lag_seconds,
        ),
    )
    return checks


async def run(s: SchedulerSettings, event_log: JetStreamLog) -> None:
    """The scheduler, and its `/metrics`, `/livez` and `/readyz` when a port is set."""
    registry = CollectorRegistry()
    scheduler = Scheduler(s, event_log, SchedulerMetrics(registry))

    def folded() -> dict[str, int]:
        return {} if scheduler.follower is None else {"scheduler": scheduler.follower.seq}

    registry.register(
        StateCollector(lambda: None if scheduler.follower is None else scheduler.follower.state)
    )
    registry.register(LogLagCollector(event_log.last_seq, folded))
    checks = health_checks(scheduler, s.ready_max_lag_seconds)
    with serving(registry, s.metrics_port, s.metrics_host, checks):
        await scheduler.run()


def main() -> None:
    with (
        telemetry.running("qm-scheduler", "QM_SCHEDULER_"),
        identity.claim(SchedulerSettings.from_env()) as s,
    ):
        process.main(process.serve(s, "qm-scheduler", lambda event_log: run(s, event_log)))


if __name__ == "__main__":
    main()
