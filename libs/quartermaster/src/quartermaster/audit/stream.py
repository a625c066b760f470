"""Reading the live log for an audit: a bounded range, never the stream's configuration.

Needs the `bus` extra (nats-py); import this module only where a stream is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from quartermaster.audit.envelope import Envelope, from_message
from quartermaster.audit.errors import PermanentAuditError, TransientAuditError
from quartermaster.audit.settings import AuditSettings
from quartermaster.bus import BusError, JetStreamLog, LogEntry, PermanentBusError
from quartermaster.bus.errors import TransientBusError


@contextlib.asynccontextmanager
async def open_log(settings: AuditSettings) -> AsyncIterator[JetStreamLog]:
    """The stream as an auditor opens it: it must exist; its config is never touched."""
    try:
        event_log = await JetStreamLog.connect(
            settings.nats_url,
            settings.stream,
            settings.subject_prefix,
            connection_name="qm-audit",
            credentials=settings.nats_credentials(),
            create_stream=False,
        )
    except PermanentBusError as err:
        raise PermanentAuditError(f"stream {settings.stream}: {err}") from err
    except BusError as err:
        raise TransientAuditError(f"cannot reach {settings.nats_url}: {err}") from err
    try:
        yield event_log
    finally:
        await event_log.close()


async def read_through(
    event_log: JetStreamLog, from_seq: int, until_seq: int
) -> AsyncGenerator[LogEntry, None]:
    """Every stored message from `from_seq` through `until_seq`, in order.

    A range read may end before `until_seq` while delivered messages still wait in
    the client (under load); the read resumes after the last message it gave, and
    gives up (TransientBusError) only when a resumed read gives nothing.
    """
    position = from_seq - 1
    while position < until_seq:
        advanced = False
        reader = event_log.read(from_seq=position + 1, until_seq=until_seq)
        async with contextlib.aclosing(reader):
            async for entry in reader:
                position = entry.seq
                advanced = True
                yield entry
        if not advanced and position < until_seq:
            raise TransientBusError(f"a read of the log stopped at seq {position} of {until_seq}")


async def read_range(
    event_log: JetStreamLog, from_seq: int = 1, to_seq: int | None = None
) -> AsyncIterator[Envelope]:
    """Envelopes from `from_seq` through `to_seq` (default: the last one stored now)."""
    try:
        last = await event_log.last_seq()
        until = last if to_seq is None else min(to_seq, last)
        if until < max(from_seq, 1):
            return
        async for entry in read_through(event_log, max(from_seq, 1), until):
            yield from_message(entry.seq, entry.subject, entry.data)
    except BusError as err:
        raise TransientAuditError(f"reading stream {event_log.stream}: {err}") from err
