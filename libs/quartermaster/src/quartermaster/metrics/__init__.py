"""Prometheus metrics of every service (names modelled on Kueue's, prefix `quartermaster_`).

State-derived gauges are computed from the folded state at scrape time
(`StateCollector`); event-derived counters and histograms are updated where
things happen (`SchedulerMetrics`, `RpcMetrics`, `NodeMetrics`). Each process
keeps one `CollectorRegistry`; `qm up` puts all its services in one. The table
of every metric is in docs/metrics.md.
"""

from quartermaster.metrics.attempts import NodeMetrics, StartObserver
from quartermaster.metrics.http import MetricsServer, serving
from quartermaster.metrics.lag import LogLagCollector
from quartermaster.metrics.rpc import RpcMetrics
from quartermaster.metrics.scheduling import SchedulerMetrics
from quartermaster.metrics.state import StateCollector, state_families

__all__ = [
    "LogLagCollector",
    "MetricsServer",
    "NodeMetrics",
    "RpcMetrics",
    "SchedulerMetrics",
    "StartObserver",
    "StateCollector",
    "serving",
    "state_families",
]
