"""The spans of one pass, in the traces of the jobs it decided for.

A pass decides for many jobs at once, so it has no trace of its own: for each
job whose trace context the log carried (`LogFollower.traces`), a `scheduler.pass`
span opens under that context (the admission append, or the job's last report),
with one child span per decision. Each decision is appended with its own span's
context, so the node agent's start hangs under the dispatch decision. Jobs that
came without a trace get no spans; decisions stay exactly what `decide` returned.
"""

from __future__ import annotations

from collections.abc import Sequence

from quartermaster.eventlog.envelope import trace_header
from quartermaster.eventlog.job_traces import JobTraces
from quartermaster.events import Event, tag_of
from quartermaster.telemetry import traces

SERVICE = "qm-scheduler"


class PassSpans:
    def __init__(
        self, job_traces: JobTraces, decisions: Sequence[Event], started_ns: int, pass_no: int
    ) -> None:
        self._spans: list[traces.Span] = []
        self._of_decision: dict[int, str | None] = {}
        if not traces.enabled():
            return
        by_job: dict[str, list[Event]] = {}
        for decision in decisions:
            job_id = getattr(decision, "job_id", None)
            if isinstance(job_id, str):
                by_job.setdefault(job_id, []).append(decision)
        for job_id, mine in by_job.items():
            parent = job_traces.get(job_id)
            if parent is None:
                continue
            attributes: traces.Attributes = {
                "qm.job_id": job_id,
                "qm.pass": pass_no,
                "qm.decisions": len(decisions),
            }
            in_pass = traces.start(
                SERVICE, "scheduler.pass", parent, attributes=attributes, start_ns=started_ns
            )
            self._spans.append(in_pass)
            for decision in mine:
                decided = traces.start(
                    SERVICE,
                    f"scheduler.decide {tag_of(decision)}",
                    in_pass.traceparent,
                    attributes={"qm.job_id": job_id, "qm.decision": tag_of(decision)},
                )
                self._spans.append(decided)
                self._of_decision[id(decision)] = decided.traceparent

    def header(self, decisions: Sequence[Event]) -> dict[str, str] | None:
        """The trace header of an envelope of these decisions (None: none is traced)."""
        if not self._of_decision:
            return None
        return trace_header([self._of_decision.get(id(d)) for d in decisions])

    def end(self) -> None:
        for span in reversed(self._spans):
            span.end()
        self._spans.clear()
