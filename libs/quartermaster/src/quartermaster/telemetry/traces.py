"""OpenTelemetry spans, optional: every call is a cheap no-op until `install` ran.

The rest of the code handles only W3C `traceparent` strings (what travels in the
log's messages, `eventlog.envelope.trace_header`), never OpenTelemetry types, so
services run without the `quartermaster[tracing]` extra installed. Each service
name gets a tracer provider of its own (its `service.name`), all feeding one
exporter: `qm up` runs every service in one process and still shows admission,
scheduler and node agents as separate services of one trace.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from quartermaster.telemetry.settings import SpanExporterKind, TelemetrySettings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span as OtelSpan
    from opentelemetry.trace import Tracer

log = logging.getLogger(__name__)

TRACEPARENT = re.compile(r"^00-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})-[0-9a-f]{2}$")
Attributes = Mapping[str, str | int | float | bool]

_tracers: dict[str, Tracer] = {}
_processors: list[SpanProcessor] = []


class TracingUnavailable(RuntimeError):
    """Tracing was asked for, but the `quartermaster[tracing]` extra is not installed."""


def enabled() -> bool:
    return bool(_tracers)


def configure(settings: TelemetrySettings, services: Iterable[str]) -> None:
    """Export the spans of `services` as `settings` says (nothing if `otel_exporter` is off)."""
    if settings.otel_exporter is SpanExporterKind.OFF:
        return
    try:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter
    except ImportError as err:
        raise TracingUnavailable(
            "otel_exporter is set but OpenTelemetry is not installed: "
            "pip install 'quartermaster[tracing]'"
        ) from err
    exporter: SpanExporter
    if settings.otel_exporter is SpanExporterKind.CONSOLE:
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.otel_endpoint or None)
    install(exporter, services, sample_ratio=settings.otel_sample_ratio)


def install(
    exporter: SpanExporter,
    services: Iterable[str],
    *,
    batch: bool = True,
    sample_ratio: float = 1.0,
) -> None:
    """One tracer provider per service name, all exporting through `exporter`.

    `batch=False` exports each span as it ends (tests read an in-memory exporter).
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    _processors.append(processor)
    sampler = ParentBased(TraceIdRatioBased(sample_ratio))
    for service in services:
        provider = TracerProvider(
            resource=Resource.create({"service.name": service}), sampler=sampler
        )
        provider.add_span_processor(processor)
        _tracers[service] = provider.get_tracer("quartermaster")


def shutdown() -> None:
    """Flush what is buffered and turn tracing off again."""
    _tracers.clear()
    while _processors:
        processor = _processors.pop()
        try:
            processor.shutdown()
        except Exception:  # an exporter that cannot reach its collector must not stop a stop
            log.warning("span exporter did not shut down cleanly", exc_info=True)


class Span:
    """A started span (or none, with tracing off); `traceparent` names it to children."""

    __slots__ = ("_span", "traceparent")

    def __init__(self, span: OtelSpan | None = None) -> None:
        self._span = span
        self.traceparent = _traceparent_of(span) if span is not None else None

    def set(self, name: str, value: str | int | float | bool) -> None:
        if self._span is not None:
            self._span.set_attribute(name, value)

    def error(self, err: BaseException) -> None:
        if self._span is not None:
            from opentelemetry.trace import Status, StatusCode

            self._span.record_exception(err)
            self._span.set_status(Status(StatusCode.ERROR, str(err)))

    def end(self, end_ns: int | None = None) -> None:
        if self._span is not None:
            self._span.end(end_time=end_ns)


NO_SPAN = Span()


def start(
    service: str,
    name: str,
    parent: str | None = None,
    *,
    attributes: Attributes | None = None,
    start_ns: int | None = None,
    links: Iterable[str] = (),
    kind: str = "INTERNAL",
) -> Span:
    """Start a span of `service` under `parent` (a traceparent), else under the current one."""
    tracer = _tracers.get(service)
    if tracer is None:
        return NO_SPAN
    from opentelemetry.trace import Link, SpanKind

    context = _context_of(parent) if parent is not None else None
    span = tracer.start_span(
        name,
        context=context,
        kind=SpanKind[kind],
        attributes=dict(attributes) if attributes else None,
        links=[Link(c) for c in (_span_context_of(p) for p in links) if c is not None],
        start_time=start_ns,
    )
    return Span(span)


@contextlib.contextmanager
def current_span(
    service: str,
    name: str,
    parent: str | None = None,
    *,
    attributes: Attributes | None = None,
    kind: str = "INTERNAL",
) -> Iterator[Span]:
    """A span that is the current one while the block runs (its logs carry its trace id)."""
    span = start(service, name, parent, attributes=attributes, kind=kind)
    if span._span is None:
        yield span
        return
    from opentelemetry import trace

    try:
        with trace.use_span(span._span, end_on_exit=False, record_exception=False):
            yield span
    except BaseException as err:
        span.error(err)
        raise
    finally:
        span.end()


def current() -> str | None:
    """The traceparent of the span current in this task, or None."""
    if not _tracers:
        return None
    from opentelemetry import trace

    span = trace.get_current_span()
    return _traceparent_of(span) if span.get_span_context().is_valid else None


def trace_id_of(traceparent: str | None) -> str | None:
    """The 32-hex trace id of a traceparent (what logs and trace UIs show)."""
    if traceparent is None:
        return None
    found = TRACEPARENT.match(traceparent)
    return found.group("trace") if found else None


def valid(traceparent: str) -> bool:
    found = TRACEPARENT.match(traceparent)
    return (
        found is not None and found.group("trace") != "0" * 32 and found.group("span") != "0" * 16
    )


def from_metadata(metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    """A caller's `traceparent` from gRPC metadata (a client that traces itself)."""
    for key, value in metadata or ():
        if key == "traceparent" and isinstance(value, str) and valid(value):
            return value
    return None


def _traceparent_of(span: Any) -> str | None:
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _span_context_of(traceparent: str) -> Any:
    from opentelemetry.trace import SpanContext, TraceFlags

    found = TRACEPARENT.match(traceparent)
    if found is None or not valid(traceparent):
        return None
    return SpanContext(
        trace_id=int(found.group("trace"), 16),
        span_id=int(found.group("span"), 16),
        is_remote=True,
        trace_flags=TraceFlags(int(traceparent[-2:], 16)),
    )


def _context_of(traceparent: str) -> Any:
    """An OpenTelemetry context whose parent is `traceparent` (a fresh root if invalid)."""
    from opentelemetry import trace
    from opentelemetry.context import Context

    span_context = _span_context_of(traceparent)
    if span_context is None:
        return Context()
    return trace.set_span_in_context(trace.NonRecordingSpan(span_context), Context())
