"""The newest trace context of each job, as the log's messages carried them.

A follower notes, per folded message, the traceparent each event of a job came
with (`envelope.traces_of`); a service then starts its own span for that job
under it: the scheduler's pass under admission's append, a node agent's start
under the dispatch decision. A job's entry goes when the job is over, and the
table keeps at most `limit` jobs (the oldest noted go first), so it stays bounded.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

from quartermaster import events as ev
from quartermaster.eventlog.envelope import TRACE_HEADER, decode_batch, traces_of

_OVER = (ev.JobSucceeded, ev.JobFinallyFailed)


class JobTraces:
    def __init__(self, limit: int = 100_000) -> None:
        self._latest: OrderedDict[str, str] = OrderedDict()
        self._limit = limit

    def __len__(self) -> int:
        return len(self._latest)

    def get(self, job_id: str) -> str | None:
        return self._latest.get(job_id)

    def note_message(self, data: bytes, headers: Mapping[str, str] | None) -> None:
        """Note the contexts a stored message carries (nothing to do without the header)."""
        if not headers or TRACE_HEADER not in headers:
            return
        try:
            events = decode_batch(data)
        except ValueError:  # msgspec.DecodeError: poison is the fold's business, not ours
            return
        self.note(events, traces_of(headers, len(events)))

    def note(self, events: Sequence[ev.Event], traceparents: Sequence[str | None]) -> None:
        for event, traceparent in zip(events, traceparents, strict=True):
            job_id = getattr(event, "job_id", None)
            if not isinstance(job_id, str):
                continue
            if isinstance(event, _OVER):
                self._latest.pop(job_id, None)
            elif traceparent is not None:
                self._latest[job_id] = traceparent
                self._latest.move_to_end(job_id)
                if len(self._latest) > self._limit:
                    self._latest.popitem(last=False)
