"""Admission's spans: each RPC, and each append of requests, in its caller's trace.

An RPC is a server span (a caller that traces sends `traceparent` metadata and
becomes its parent). A write appends one envelope that may hold several callers'
requests (group commit), so the append gets one `admission.append` span per
caller's trace, and each event is appended with its own caller's span context
(`eventlog.envelope.trace_header`): the job's trace goes on from there to the
scheduler. All of it is skipped while tracing is off.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from qm_admission.interceptors import Streaming, Unary, WrappingInterceptor
from quartermaster.eventlog.envelope import trace_header
from quartermaster.telemetry import traces

SERVICE = "qm-admission"


class TracingInterceptor(WrappingInterceptor):
    """Each unary RPC of ours runs as the current span (health and reflection do not)."""

    def skips(self, method: str) -> bool:
        return not method.startswith("/qm.")

    def unary(self, method: str, behavior: Unary) -> Unary:
        name = method.lstrip("/")
        service, _, rpc = name.partition("/")
        attributes = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": rpc}

        async def call(request: Any, context: Any) -> Any:
            parent = traces.from_metadata(context.invocation_metadata())
            with traces.current_span(SERVICE, name, parent, attributes=attributes, kind="SERVER"):
                return await behavior(request, context)

        return call

    def streaming(self, method: str, behavior: Streaming) -> Streaming:
        return behavior  # watches live for minutes: a span would say little


def interceptors() -> list[TracingInterceptor]:
    """The tracing interceptor when tracing is on (none at all otherwise)."""
    return [TracingInterceptor()] if traces.enabled() else []


class AppendSpans:
    """The `admission.append` spans of one envelope, and its trace header.

    `callers`: per event, the traceparent of the RPC that asked for it (None: untraced).
    """

    def __init__(self, callers: Sequence[str | None], subject: str) -> None:
        self._spans: dict[str, traces.Span] = {}
        self.header: dict[str, str] | None = None
        if not traces.enabled() or not any(callers):
            return
        attributes = {"messaging.system": "nats", "messaging.destination.name": subject}
        appended: list[str | None] = []
        for caller in callers:
            if caller is None:
                appended.append(None)
                continue
            span = self._spans.get(caller)
            if span is None:
                span = self._spans[caller] = traces.start(
                    SERVICE, "admission.append", caller, attributes=attributes, kind="PRODUCER"
                )
            appended.append(span.traceparent)
        self.header = trace_header(appended)

    def end(self, seq: int | None = None, error: BaseException | None = None) -> None:
        for span in self._spans.values():
            if seq is not None:
                span.set("qm.seq", seq)
            if error is not None:
                span.error(error)
            span.end()
        self._spans.clear()


def of_callers(job_ids: Iterable[str | None], traced: dict[str, str | None]) -> list[str | None]:
    """Per event (by the job it names), the traceparent of the caller that asked for it."""
    return [traced.get(job_id) if job_id is not None else None for job_id in job_ids]


def callers_of(
    events: Sequence[Any], results: Sequence[Sequence[Any]], traced: Sequence[str | None]
) -> tuple[str | None, ...]:
    """Per event of a group's plan, the traceparent of the call whose job it names.

    `results[i]` are call i's outcomes (replies naming a job id, or refusals) and
    `traced[i]` the traceparent that call was made under.
    """
    by_job = {
        outcome.job_id: trace
        for outcomes, trace in zip(results, traced, strict=True)
        for outcome in outcomes
        if trace is not None and getattr(outcome, "job_id", None)
    }
    return tuple(by_job.get(getattr(event, "job_id", None) or "") for event in events)
