"""`qm log import` and `qm up --restore`: an exported log written back into an empty stream.

The file is read twice: once to check all of it (it decodes, its seqs run from 1
without gaps), so a bad file leaves the stream untouched, then to append. Appends
are pipelined in fenced batches (`append_batch` with `expected_last_seq`), so each
message lands at its own seq or the import stops: a service started too early, or
any other writer, cannot slip a message in between. Needs a NATS user that may
write every subject family (the admin user), and the `bus` extra.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import nats.js.errors

from quartermaster.audit.errors import PermanentAuditError, TransientAuditError
from quartermaster.audit.logfile import Stored, read_stored
from quartermaster.audit.restore import check, msg_id, plan, refusal
from quartermaster.audit.stream import CONNECT_DEADLINE_S, connect_within
from quartermaster.bus import BusError, JetStreamLog
from quartermaster.bus.access import BusSettings
from quartermaster.bus.translate import NATS_FAILURES
from quartermaster.embedded.nats_auth import BusLayout
from quartermaster.eventlog.bootstrap import make_buckets

BATCH = 256  # messages per fenced batch (acks pipelined within it)


class RestoreRefusedError(PermanentAuditError):
    """The target stream is not empty (or cannot number the messages from seq 1)."""


class ImportInterruptedError(TransientAuditError):
    """The import stopped part way; the stream holds the messages up to `stored`."""

    def __init__(self, message: str, stored: int) -> None:
        super().__init__(message)
        self.stored = stored


class Imported(msgspec.Struct, frozen=True):
    messages: int
    events: int
    moved_from: str  # the file's subject prefix where the stream's differs ("": the same)


@contextlib.asynccontextmanager
async def open_target(
    settings: BusSettings,
    layout: BusLayout,
    *,
    source: str = "",
    deadline_s: float = CONNECT_DEADLINE_S,
) -> AsyncIterator[JetStreamLog]:
    """The stream to import into, reached within the deadline. Where it does not exist
    it is made, with the scheduler's buckets, as the bootstrap makes them; an existing
    stream's configuration is never touched."""
    nc = await connect_within(settings, deadline_s, source, name="qm-log-import")
    event_log = JetStreamLog(nc, settings.stream, settings.subject_prefix, owns_connection=True)
    try:
        await _made(event_log, settings.stream_replicas, layout)
        yield event_log
    finally:
        await event_log.close()


async def _made(event_log: JetStreamLog, replicas: int, layout: BusLayout) -> None:
    try:
        try:
            await event_log.js.stream_info(event_log.stream)
        except nats.js.errors.NotFoundError:
            await event_log.ensure_stream(replicas=replicas)
            await make_buckets(event_log.js, layout, replicas=replicas)
    except BusError as err:
        raise TransientAuditError(f"stream {event_log.stream}: {err}") from err
    except NATS_FAILURES as err:
        raise TransientAuditError(f"stream {event_log.stream}: {_said(err)}") from err


async def import_log(event_log: JetStreamLog, path: Path, snapshot_bucket: str) -> Imported:
    """Append every message of the file at `path` at its own seq (see the module doc)."""
    prefix = event_log.prefix
    summary = check(read_stored(path), prefix)  # the whole file, before any write
    last_seq, held = await _fill(event_log)
    why = refusal(event_log.stream, last_seq, held, await _held(event_log, snapshot_bucket))
    if why is not None:
        raise RestoreRefusedError(why)
    stored = 0
    for batch in _batches(plan(read_stored(path), prefix)):
        items = [(m.subject, m.data, msg_id(m.seq)) for m in batch]
        try:
            seqs = await event_log.append_batch(items, expected_last_seq=batch[0].seq - 1)
        except BusError as err:
            stored = await _last_seq(event_log, stored)
            raise ImportInterruptedError(
                f"the import stopped after seq {stored} of {summary.messages} ({err}): the "
                "stream holds that part of the log; delete the stream and import again",
                stored,
            ) from err
        if seqs != [m.seq for m in batch]:  # the fences make this unreachable; never trust it
            raise ImportInterruptedError(
                f"messages {batch[0].seq}-{batch[-1].seq} were stored at seqs "
                f"{seqs[0]}-{seqs[-1]}: another writer used the stream",
                stored,
            )
        stored = batch[-1].seq
    moved_from = summary.prefix if summary.prefix not in ("", prefix) else ""
    return Imported(summary.messages, summary.events, moved_from)


def _batches(messages: Iterator[Stored]) -> Iterator[list[Stored]]:
    while batch := list(itertools.islice(messages, BATCH)):
        yield batch


async def _fill(event_log: JetStreamLog) -> tuple[int, int]:
    """(last seq, messages) of the stream."""
    try:
        info = await event_log.js.stream_info(event_log.stream)
    except NATS_FAILURES as err:
        raise TransientAuditError(f"stream {event_log.stream}: {_said(err)}") from err
    return int(info.state.last_seq), int(info.state.messages)


async def _held(event_log: JetStreamLog, bucket: str) -> int:
    """Messages in the scheduler's snapshot bucket (0 where there is none)."""
    try:
        info = await event_log.js.stream_info(f"OBJ_{bucket}")
    except nats.js.errors.NotFoundError:
        return 0
    except NATS_FAILURES as err:
        raise TransientAuditError(f"snapshot bucket {bucket}: {_said(err)}") from err
    return int(info.state.messages)


async def _last_seq(event_log: JetStreamLog, known: int) -> int:
    with contextlib.suppress(BusError):
        return await event_log.last_seq()
    return known


def _said(err: BaseException) -> str:
    return str(err) or type(err).__name__
