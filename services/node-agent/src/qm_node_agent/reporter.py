"""Appends this host's reports to its subject, idempotently and until they are stored."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from quartermaster import events as ev
from quartermaster.bus import JetStreamLog, PermanentBusError, TransientBusError
from quartermaster.eventlog import encode_batch, subjects
from quartermaster.eventlog.envelope import trace_header

log = logging.getLogger(__name__)

AttemptReport = (
    ev.JobStarting | ev.JobRunning | ev.JobSucceeded | ev.JobFailed | ev.JobStopConfirmed
)
_KINDS: dict[type[ev.Event], str] = {
    ev.JobStarting: "starting",
    ev.JobRunning: "running",
    ev.JobSucceeded: "succeeded",
    ev.JobFailed: "failed",
    ev.JobStopConfirmed: "stop_confirmed",
}
MAX_BACKOFF_S = 5.0


def report_msg_id(report: AttemptReport) -> str:
    """`<job>:<attempt>:<host>:<kind>`: a report appended twice is stored once."""
    return f"{report.job_id}:{report.attempt}:{report.host}:{_KINDS[type(report)]}"


class Reporter:
    def __init__(self, event_log: JetStreamLog, host_id: str) -> None:
        self._log = event_log
        self.subject = subjects.reports(host_id, prefix=event_log.prefix)

    async def report(self, event: AttemptReport, trace: str | None = None) -> int:
        return await self.append(event, report_msg_id(event), trace)

    async def report_together(self, events: list[AttemptReport], trace: str | None = None) -> int:
        """Several reports in one message, under the last one's msg id (a restart that
        repeats that one is deduplicated; one repeating an earlier one changes nothing)."""
        return await self.append_many(events, report_msg_id(events[-1]), trace)

    async def append(self, event: ev.Event, msg_id: str | None, trace: str | None = None) -> int:
        return await self.append_many([event], msg_id, trace)

    async def append_many(
        self, events: Sequence[ev.Event], msg_id: str | None, trace: str | None = None
    ) -> int:
        """Append the events as one envelope; retries transient failures with the same msg id.

        `trace`: the traceparent the reports are made under (the envelope's trace header).
        Raises `PermanentBusError` when the stream rejects it for good.
        """
        delay = 0.1
        data, headers = encode_batch(events), trace_header([trace] * len(events))
        while True:
            try:
                return await self._log.append(self.subject, data, msg_id=msg_id, headers=headers)
            except TransientBusError as err:
                log.warning("append %s failed (%s); retrying in %.1fs", msg_id, err, delay)
            except PermanentBusError:
                log.exception("append %s rejected", msg_id)
                raise
            await asyncio.sleep(delay)
            delay = min(MAX_BACKOFF_S, delay * 2)
