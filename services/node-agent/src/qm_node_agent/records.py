"""Attempt records: what this host launched, kept on disk so a restart never launches twice.

A record is written BEFORE the runtime starts the job, updated with where the
job runs (pid, container) and, before the final report is appended, with that
report. It is deleted once the folded log shows the attempt is over on this host.
"""

from __future__ import annotations

import asyncio
import logging
import os

import msgspec

from qm_node_agent.layout import Layout
from quartermaster import events as ev

log = logging.getLogger(__name__)

Outcome = ev.JobSucceeded | ev.JobFailed | ev.JobStopConfirmed


class AttemptRecord(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    attempt: int
    host: str
    runtime: str
    chain_id: str
    launched_at: float
    container: str = ""  # docker: the container name
    pid: int | None = None  # process: the wrapper's pid (its process group id too)
    exit_file: str = ""  # process: where the wrapper writes the exit status
    log_file: str = ""
    running_at: float | None = None  # when this host reported JobRunning
    outcome: Outcome | None = None  # the final report, saved before it is appended

    @property
    def key(self) -> tuple[str, int]:
        return (self.job_id, self.attempt)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AttemptRecord)


class AttemptStore:
    def __init__(self, layout: Layout) -> None:
        self._folder = layout.attempts
        self._path_of = layout.record

    def save(self, record: AttemptRecord) -> None:
        """Write atomically and durably (tmp file, fsync, rename, fsync the folder)."""
        path = self._path_of(record.job_id, record.attempt)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as handle:
            handle.write(_encoder.encode(record))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        folder = os.open(self._folder, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)

    async def persist(self, record: AttemptRecord) -> None:
        """`save` in a worker thread: the fsyncs never block the agent's event loop."""
        await asyncio.to_thread(self.save, record)

    def exists(self, job_id: str, attempt: int) -> bool:
        return self._path_of(job_id, attempt).exists()

    def delete(self, job_id: str, attempt: int) -> None:
        self._path_of(job_id, attempt).unlink(missing_ok=True)

    def load_all(self) -> list[AttemptRecord]:
        records = []
        for path in sorted(self._folder.glob("*.json")):
            try:
                records.append(_decoder.decode(path.read_bytes()))
            except (OSError, msgspec.DecodeError):
                log.exception("unreadable attempt record %s skipped", path)
        return records
