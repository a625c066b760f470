"""Warm-pool service settings, read once from `QM_WARMPOOL_*` environment variables."""

from __future__ import annotations

from collections.abc import Mapping

from quartermaster.bus.access import BusSettings
from quartermaster.envsettings import from_env


class WarmPoolSettings(BusSettings, frozen=True, kw_only=True):
    tick_seconds: float = 5.0  # regular ticks: host liveness is judged on them
    # Read the log every this many seconds, a batch at a time (0: be sent each message).
    # Timers are seconds to hours away, so a fraction of a second late to learn of one
    # changes nothing, and one wake-up per batch costs far less than one per message.
    read_interval_seconds: float = 0.25
    metrics_port: int = 0  # serve /metrics, /livez and /readyz here (0: off)
    metrics_host: str = "127.0.0.1"
    ready_max_lag_seconds: float = 10.0  # /readyz: the fold at most this far behind the log

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WarmPoolSettings:
        return from_env(cls, "QM_WARMPOOL_", env)
