"""How long the start of an attempt took on a host, per phase."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

START_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class NodeMetrics:
    """Shared by every agent of a process; `host` tells them apart."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.start_phase = Histogram(
            "quartermaster_attempt_start_phase_seconds",
            "Time an attempt's start spent in each phase on its host ("
            "launch: from the record's launch to the RUNNING report)",
            ["host", "phase"],
            buckets=START_BUCKETS,
            registry=CollectorRegistry() if registry is None else registry,
        )

    def observe(self, host: str, phase: str, seconds: float) -> None:
        self.start_phase.labels(host, phase).observe(max(0.0, seconds))
