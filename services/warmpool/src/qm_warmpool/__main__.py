"""`python -m qm_warmpool`: the warm-pool service's composition root."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from qm_warmpool.service import WarmPoolService
from qm_warmpool.settings import WarmPoolSettings
from quartermaster import telemetry
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import process
from quartermaster.metrics import LogLagCollector, serving


async def run(s: WarmPoolSettings, event_log: JetStreamLog) -> None:
    """The service, and its `/metrics` (how far its fold is behind) when a port is set."""
    service = WarmPoolService(s, event_log)
    registry = CollectorRegistry()
    registry.register(
        LogLagCollector(event_log.last_seq, lambda: {"warmpool": service.follower.seq})
    )
    with serving(registry, s.metrics_port, s.metrics_host):
        await service.run()


def main() -> None:
    with telemetry.running("qm-warmpool", "QM_WARMPOOL_"):
        s = WarmPoolSettings.from_env()
        process.main(process.serve(s, "qm-warmpool", lambda event_log: run(s, event_log)))


if __name__ == "__main__":
    main()
