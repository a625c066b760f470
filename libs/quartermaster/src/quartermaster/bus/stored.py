"""Batched direct gets: what a stream stores from a seq on, in one request.

Why: a push consumer sends each message as it is stored, so a reader that folds the
log wakes once per message (a TLS record, a socket read and a loop turn each). A
reader that needs the log only to within a fraction of a second (the warm pool's
timers, a scheduler standing by) asks every interval for what was stored since its
last read: one request, a burst of replies taken in one read, an end-of-batch status
(`$JS.API.DIRECT.GET.<stream>` with `batch`, NATS 2.11 on; the stream allows direct
gets). No consumer lives on the server, so there is none to lose or recreate.

Any replica of the stream may answer. One that lags holds fewer messages, never other
ones (a replica stores only what its group committed, in order), so a read from it
ends early and the next read goes on from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from quartermaster.bus.entry import LogEntry
from quartermaster.bus.errors import BusError, PermanentBusError, TransientBusError
from quartermaster.bus.inline import subscribe_inline, write_now
from quartermaster.bus.translate import NATS_FAILURES, bus_error

_SEQUENCE = "Nats-Sequence"
_SUBJECT = "Nats-Subject"
_PENDING = "Nats-Num-Pending"
_STATUS = "Status"
_END_OF_BATCH = "204"
_NOT_FOUND = "404"  # nothing stored at or after the seq asked for
# What a direct get adds to a message's own headers (a push delivery carries none).
_ANSWER = frozenset(
    {
        "Nats-Stream",
        _SEQUENCE,
        _SUBJECT,
        "Nats-Time-Stamp",
        _PENDING,
        "Nats-Last-Sequence",
        "Nats-UpTo-Sequence",
    }
)
MAX_BATCH_BYTES = 4 * 1024 * 1024  # per request; a larger backlog takes more requests


class _Batch:
    def __init__(self) -> None:
        self.messages: list[LogEntry] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class StoredBatches:
    """Reads of `stream`'s messages on `subject_filter`, a batch per request."""

    def __init__(self, nc: NatsClient, stream: str, subject_filter: str) -> None:
        self._nc = nc
        self._stream = stream
        self._filter = subject_filter
        self._prefix = nc.new_inbox()
        self._tokens = itertools.count()
        self._waiting: dict[str, _Batch] = {}
        self._sub: Subscription | None = None

    async def read(self, from_seq: int, limit: int, timeout: float) -> list[LogEntry]:
        """Up to `limit` messages stored at `from_seq` or after, in order (empty: none yet)."""
        if self._sub is None:
            self._sub = await subscribe_inline(self._nc, f"{self._prefix}.*", self._on_reply)
        token = str(next(self._tokens))
        batch = self._waiting[token] = _Batch()
        request = {
            "seq": max(from_seq, 1),
            "batch": limit,
            "max_bytes": MAX_BATCH_BYTES,
            "next_by_subj": self._filter,
        }
        try:
            await self._nc.publish(
                f"$JS.API.DIRECT.GET.{self._stream}",
                json.dumps(request).encode(),
                reply=f"{self._prefix}.{token}",
            )
            write_now(self._nc)
            async with asyncio.timeout(timeout):  # not wait_for: keeps a cancel
                await batch.done
        except TimeoutError as err:
            raise TransientBusError(
                f"read {self._stream} from {from_seq}: no end of batch within {timeout:g} s"
            ) from err
        except NATS_FAILURES as err:
            raise bus_error(err, f"read {self._stream} from {from_seq}") from err
        finally:
            self._waiting.pop(token, None)
        return batch.messages

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(*NATS_FAILURES):  # gone with its connection
                await sub.unsubscribe()
        for batch in self._waiting.values():
            if not batch.done.done():
                batch.done.set_exception(TransientBusError("reader stopped"))
        self._waiting.clear()

    def _on_reply(self, msg: Msg) -> None:
        batch = self._waiting.get(msg.subject.rsplit(".", 1)[1])
        if batch is None or batch.done.done():
            return  # a reply to a read that timed out
        headers = msg.headers or {}
        status = headers.get(_STATUS)
        if status is None:
            batch.messages.append(_stored(msg, headers))
        elif status in (_END_OF_BATCH, _NOT_FOUND):
            batch.done.set_result(None)
        else:
            batch.done.set_exception(self._failure(status, headers))

    def _failure(self, status: str, headers: dict[str, str]) -> BusError:
        description = headers.get("Description", "")
        text = f"read {self._stream}: status {status} {description}".rstrip()
        if status.startswith("5") or status == "408":  # 503: no responders
            return TransientBusError(text)
        return PermanentBusError(text)


def _stored(msg: Msg, headers: dict[str, str]) -> LogEntry:
    """The entry of one answer: the message's own headers (what the direct get added left
    out) and what the stream held after it when the replica answered."""
    own = {key: value for key, value in headers.items() if key not in _ANSWER}
    return LogEntry(
        seq=int(headers[_SEQUENCE]),
        subject=headers.get(_SUBJECT, msg.subject),
        data=msg.data,
        headers=own,
        num_pending=int(headers.get(_PENDING, 0)),
    )
