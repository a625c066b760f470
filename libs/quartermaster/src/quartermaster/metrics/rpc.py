"""Latency of every gRPC call admission serves, by method and status code."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class RpcMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.duration = Histogram(
            "quartermaster_rpc_duration_seconds",
            "Server-side time of a unary gRPC call, by full method name and status code",
            ["method", "code"],
            buckets=RPC_BUCKETS,
            registry=CollectorRegistry() if registry is None else registry,
        )

    def observe(self, method: str, code: str, seconds: float) -> None:
        self.duration.labels(method, code).observe(seconds)
