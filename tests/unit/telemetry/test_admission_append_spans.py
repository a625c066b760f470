"""Admission's append spans: one per caller's trace, each event sent with its own caller's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from qm_admission.tracing import SERVICE, AppendSpans, callers_of
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.eventlog.envelope import traces_of
from quartermaster.telemetry import traces


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    traces.install(exporter, [SERVICE], batch=False)
    yield exporter
    traces.shutdown()


def rpc() -> str:
    span = traces.start(SERVICE, "rpc")
    span.end()
    assert span.traceparent is not None
    return span.traceparent


def test_each_caller_gets_an_append_span_and_each_event_its_callers(
    exported: InMemorySpanExporter,
) -> None:
    first, second = rpc(), rpc()
    spans = AppendSpans([first, first, second, None], "qm.requests")
    assert spans.header is not None
    sent = traces_of(spans.header, 4)
    spans.end()
    appends = [s for s in exported.get_finished_spans() if s.name == "admission.append"]
    assert len(appends) == 2
    by_parent = {f"{s.parent.span_id:016x}": s for s in appends if s.parent is not None}
    for caller, event in ((first, sent[0]), (second, sent[2])):
        append = by_parent[caller.split("-")[2]]
        assert append.context.trace_id == int(caller.split("-")[1], 16)
        assert event is not None and event.split("-")[2] == f"{append.context.span_id:016x}"
    assert sent[0] == sent[1] and sent[3] is None


def test_without_tracing_nothing_is_sent() -> None:
    spans = AppendSpans(["00-" + "a" * 32 + "-" + "b" * 16 + "-01"], "qm.requests")
    assert spans.header is None
    spans.end()


def test_a_groups_events_name_the_call_whose_job_they_are() -> None:
    events = [
        ev.JobPriorityUpdated(at=1.0, job_id="j2", scheduling_priority=1),
        ev.JobPriorityUpdated(at=1.0, job_id="j1", scheduling_priority=1),
        ev.ClockTicked(at=1.0),
    ]
    reply = pb.SubmitServiceJobResponse
    results = [[reply(job_id="j1")], [reply(job_id="j2")]]
    assert callers_of(events, results, ["A", "B"]) == ("B", "A", None)
    assert callers_of(events, results, [None, "B"]) == ("B", None, None)
