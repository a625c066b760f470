"""One job's trace across the services of a stack: admission, scheduler, node agent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from conftest import StackFactory, client_for
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from scenario import setup_queue, shell, status, until

from quartermaster.audit import verify
from quartermaster.audit.envelope import Envelope, from_message
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog.envelope import TRACE_HEADER
from quartermaster.telemetry import traces
from quartermaster_stack.stack import SERVICES
from quartermaster_stack.thread import StackThread

SUBMIT = "qm.v1.ServiceJobs/SubmitServiceJob"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Every service of the stack exports its spans here, each as it ends."""
    exporter = InMemorySpanExporter()
    traces.install(exporter, sorted(set(SERVICES.values())), batch=False)
    yield exporter
    traces.shutdown()


def service_of(span: ReadableSpan) -> str:
    return str(span.resource.attributes["service.name"])


async def stored(stack: StackThread) -> list[tuple[Envelope, bool]]:
    """The stack's log as an auditor reads it, and whether each message carried contexts."""
    settings = stack.stack.settings
    async with await JetStreamLog.connect(
        stack.stack.nats_url, settings.stream, settings.subject_prefix, create_stream=False
    ) as event_log:
        last = await event_log.last_seq()
        return [
            (from_message(e.seq, e.subject, e.data), TRACE_HEADER in (e.headers or {}))
            async for e in event_log.read(from_seq=1, until_seq=last)
        ]


def ancestry(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    """`span`, its parent, its parent's parent ... up to the root of the trace."""
    chain = [span]
    while chain[-1].parent is not None:
        parent = by_id.get(chain[-1].parent.span_id)
        assert parent is not None, f"{chain[-1].name}: its parent span was not exported"
        chain.append(parent)
    return chain


def test_a_jobs_submit_dispatch_start_and_run_are_one_trace(
    make_stack: StackFactory, spans: InMemorySpanExporter
) -> None:
    stack = make_stack(nodes=1)
    c = client_for(stack)
    queue = setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    job = queue.submit(shell("exit 0"), job_name="traced", quota_share_name="A")
    until("the job succeeded", lambda: status(c, job.job_id) == "SUCCEEDED")
    until(
        "the node agent's run span ended",
        lambda: any(s.name == "node_agent.run" for s in spans.get_finished_spans()),
    )
    (submit,) = [s for s in spans.get_finished_spans() if s.name == SUBMIT]
    trace_id = submit.context.trace_id
    mine = [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]
    by_id = {s.context.span_id: s for s in mine}
    (run,) = [s for s in mine if s.name == "node_agent.run"]

    chain = ancestry(run, by_id)
    names = [s.name for s in reversed(chain)]
    assert names[:2] == [SUBMIT, "admission.append"], names
    assert names[-3:] == ["scheduler.decide job.dispatched", "node_agent.start", "node_agent.run"]
    assert "scheduler.pass" in names
    assert [service_of(s) for s in reversed(chain)][:2] == ["qm-admission"] * 2
    assert {service_of(s) for s in chain} == {"qm-admission", "qm-scheduler", "qm-node-agent"}
    assert chain[-1] is submit  # the RPC is the root: one trace from submit to run
    # The pass's spans are in this job's trace because they concern this job.
    assert all(
        s.attributes is not None and s.attributes.get("qm.job_id") == job.job_id
        for s in chain
        if s.name.startswith("scheduler.") or s.name.startswith("node_agent.")
    )

    # The contexts went beside the batches: the log verifies like an untraced one.
    log = asyncio.run(stored(stack))
    assert sum(traced for _, traced in log) >= 3  # the submit, the dispatch, the reports
    assert verify([envelope for envelope, _ in log]).ok
