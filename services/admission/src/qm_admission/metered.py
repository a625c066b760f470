"""Times every unary RPC for Prometheus: `quartermaster_rpc_duration_seconds{method, code}`.

Outermost of admission's interceptors, so the time includes authentication,
screening and the error translation, and the code is the status the client got.
"""

from __future__ import annotations

import time
from typing import Any

import grpc

from qm_admission.interceptors import Streaming, Unary, WrappingInterceptor
from quartermaster.metrics import RpcMetrics

UNTIMED = frozenset({"/grpc.health.v1.Health/Watch"})  # lasts as long as its client waits


class MeteredInterceptor(WrappingInterceptor):
    def __init__(self, metrics: RpcMetrics) -> None:
        self.metrics = metrics

    def skips(self, method: str) -> bool:
        return method in UNTIMED

    def unary(self, method: str, behavior: Unary) -> Unary:
        observe = self.metrics.observe

        async def call(request: Any, context: Any) -> Any:
            started = time.perf_counter()
            code = "OK"
            try:
                return await behavior(request, context)
            except BaseException:
                code = _code_name(context.code())
                raise
            finally:
                observe(method, code, time.perf_counter() - started)

        return call

    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        return behavior  # a stream's length is its client's choice, not a latency


def _code_name(code: Any) -> str:
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    return "UNKNOWN" if code is None else str(code)
