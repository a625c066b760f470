"""The trace context beside a message's batch: round trips, old messages, bad headers."""

from __future__ import annotations

from quartermaster import events as ev
from quartermaster.eventlog import decode_batch, encode_batch
from quartermaster.eventlog.envelope import (
    MAX_TRACE_HEADER_BYTES,
    TRACE_HEADER,
    trace_header,
    traces_of,
)
from quartermaster.eventlog.job_traces import JobTraces

A = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
B = "00-" + "c" * 32 + "-" + "d" * 16 + "-01"


def running(job_id: str) -> ev.JobRunning:
    return ev.JobRunning(at=1.0, job_id=job_id, attempt=1, host="h1")


def test_contexts_round_trip_in_event_order_with_runs_written_once() -> None:
    contexts = [A, A, A, None, B, None]
    header = trace_header(contexts)
    assert header is not None
    assert header[TRACE_HEADER].count(A) == 1
    assert traces_of(header, len(contexts)) == contexts


def test_a_message_without_the_header_reads_as_before_with_no_contexts() -> None:
    batch = [running("j1"), running("j2")]
    data = encode_batch(batch)  # what every message written before tracing holds
    assert decode_batch(data) == batch
    assert traces_of(None, 2) == [None, None]
    assert traces_of({"Nats-Msg-Id": "x"}, 2) == [None, None]
    assert trace_header([None, None]) is None  # untraced batches get no header


def test_the_batch_bytes_do_not_depend_on_tracing() -> None:
    batch = [running("j1")]
    assert encode_batch(batch) == encode_batch(list(batch))
    assert trace_header([A]) is not None  # the context goes beside the bytes, not in them


def test_a_malformed_header_gives_no_contexts_instead_of_an_error() -> None:
    for value in ("junk", f"{A}*x", f"{A}*0", f"{A}*5", "00-zz-zz-01", f"{A},{A},{A}"):
        assert traces_of({TRACE_HEADER: value}, 2) == [None, None], value


def test_contexts_past_the_size_budget_are_left_out() -> None:
    many = [f"00-{i:032x}-{i + 1:016x}-01" for i in range(1, 1001)]
    header = trace_header(many)
    assert header is not None
    assert len(header[TRACE_HEADER]) <= MAX_TRACE_HEADER_BYTES
    read = traces_of(header, len(many))
    kept = [c for c in read if c is not None]
    assert 0 < len(kept) < len(many)
    assert read[: len(kept)] == many[: len(kept)]


def test_job_traces_keep_each_jobs_newest_context_until_it_is_over() -> None:
    traces = JobTraces()
    traces.note([running("j1"), running("j2")], [A, None])
    assert traces.get("j1") == A and traces.get("j2") is None
    traces.note([running("j1")], [B])
    assert traces.get("j1") == B
    traces.note([ev.JobSucceeded(at=2.0, job_id="j1", attempt=1, host="h1")], [None])
    assert traces.get("j1") is None and len(traces) == 0


def test_job_traces_are_bounded() -> None:
    traces = JobTraces(limit=2)
    for job in ("j1", "j2", "j3"):
        traces.note([running(job)], [A])
    assert len(traces) == 2 and traces.get("j1") is None and traces.get("j3") == A


def test_job_traces_read_a_stored_message() -> None:
    traces = JobTraces()
    data = encode_batch([running("j1"), running("j2")])
    traces.note_message(data, trace_header([A, B]))
    assert (traces.get("j1"), traces.get("j2")) == (A, B)
    traces.note_message(b"\xc1poison", trace_header([A]))  # never raises
