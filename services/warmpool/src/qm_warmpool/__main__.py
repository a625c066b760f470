"""`python -m qm_warmpool`: the warm-pool service's composition root."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from qm_warmpool.service import WarmPoolService
from qm_warmpool.settings import WarmPoolSettings
from quartermaster import health, telemetry
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import process
from quartermaster.metrics import LogLagCollector, serving


def health_checks(service: WarmPoolService, max_lag_seconds: float) -> health.Health:
    """Live: its fold runs. Ready: on the bus and caught up (its ticks come from the fold)."""
    checks = health.Health()
    follower = service.follower
    checks.live("follower", health.running(lambda: follower.reader, "log follower"))
    checks.ready("nats", health.connected(lambda: service.log.nc.is_connected))
    checks.ready(
        "log", health.caught_up(lambda: follower.seq, service.log.last_seq, max_lag_seconds)
    )
    return checks


async def run(s: WarmPoolSettings, event_log: JetStreamLog) -> None:
    """The service, and its `/metrics` (how far its fold is behind), `/livez` and `/readyz`
    when a port is set."""
    service = WarmPoolService(s, event_log)
    registry = CollectorRegistry()
    registry.register(
        LogLagCollector(event_log.last_seq, lambda: {"warmpool": service.follower.seq})
    )
    checks = health_checks(service, s.ready_max_lag_seconds)
    with serving(registry, s.metrics_port, s.metrics_host, checks):
        await service.run()


def main() -> None:
    with telemetry.running("qm-warmpool", "QM_WARMPOOL_"):
        s = WarmPoolSettings.from_env()
        process.main(process.serve(s, "qm-warmpool", lambda event_log: run(s, event_log)))


if __name__ == "__main__":
    main()
