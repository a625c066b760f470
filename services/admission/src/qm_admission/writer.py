"""The write path: validate against the caught-up state, append one envelope, fenced.

Every write runs `plan(state, now)` on the follower's state caught up with the
stream, then appends the planned events as one envelope on `<prefix>.requests`
with `Nats-Expected-Last-Subject-Sequence` set to the last request folded. If
another writer (another admission process) appended a request in between, the
append is fenced and the write is planned again on the newer state, so two
racing requests can never both pass a check (a name taken twice, a 21st share).
Writes of this process are serialised by a lock, so they do not fence each other.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import msgspec

from qm_admission import access
from qm_admission.errors import RequestRejected, TransientAdmissionError, invalid
from qm_admission.tokens import new_msg_id
from qm_admission.tracing import AppendSpans
from quartermaster.bus import FencedAppendError, JetStreamLog
from quartermaster.core import State
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.events import Event
from quartermaster.events.base import Request
from quartermaster.telemetry import traces

log = logging.getLogger(__name__)

T = TypeVar("T")

# NATS refuses messages above the server's max_payload (1 MiB by default, 8 MiB in
# Quartermaster's configs); stay clear of it by the room headers take.
HEADER_ROOM_BYTES = 16 * 1024


class Plan(msgspec.Struct, Generic[T], frozen=True):
    """What a request writes (maybe nothing) and what it answers."""

    events: list[Event]
    result: T
    msg_id: str | None = None  # None: a random id that dedupes this write's own retries
    rejected_some: bool = False  # a batch refused some items: recheck them caught up
    # Per event, the traceparent of the call that asked for it (several callers'
    # calls in one plan); empty: every event is this write's caller's.
    callers: tuple[str | None, ...] = ()


class Written(msgspec.Struct, Generic[T], frozen=True):
    result: T
    seq: int  # the envelope's stream seq, or the position validated against if nothing was written
    appended: bool


Planner = Callable[[State, float], Plan[T] | Awaitable[Plan[T]]]


class RequestWriter:
    def __init__(
        self,
        event_log: JetStreamLog,
        follower: LogFollower,
        *,
        clock: Callable[[], float] = time.time,
        catch_up_timeout: float = 10.0,
        max_fenced_retries: int = 8,
    ) -> None:
        self._log = event_log
        self._follower = follower
        self._clock = clock
        self._catch_up_timeout = catch_up_timeout
        self._max_fenced_retries = max_fenced_retries
        self._lock = asyncio.Lock()
        self.subject = subjects.requests(event_log.prefix)
        self.last_seq = 0  # newest envelope this process appended (for read-your-writes)

    @property
    def max_envelope_bytes(self) -> int:
        """The largest envelope the connected server takes (its INFO says)."""
        return int(self._log.nc.max_payload) - HEADER_ROOM_BYTES

    async def write(self, planner: Planner[T]) -> Written[T]:
        """Plan on the current state and append; raises `RequestRejected` from the plan.

        The first try plans on the state as folded so far (this process's own
        writes included), without asking the server where the stream ends: the
        fence catches a request that raced with another writer. Only a fenced
        append or a rejection is re-planned on the caught-up state, so a stale
        view can never wrongly accept (fenced) nor wrongly reject (re-checked).
        """
        fallback_msg_id = new_msg_id()
        async with self._lock:
            fresh = False
            for _ in range(self._max_fenced_retries):
                try:
                    if fresh:
                        position = await self._follower.catch_up(self._catch_up_timeout)
                    else:
                        if self._follower.seq < self.last_seq:  # else no wait (nor its task)
                            await self._follower.wait_for(self.last_seq, self._catch_up_timeout)
                        position = self._follower.seq
                except TimeoutError as err:
                    raise TransientAdmissionError("the event log follower is behind") from err
                try:
                    planned = planner(self._follower.state, self._clock())
                    plan = await planned if isinstance(planned, Awaitable) else planned
                except RequestRejected:
                    if fresh:
                        raise
                    fresh = True  # the view may trail another writer: check again caught up
                    continue
                if not fresh and (plan.rejected_some or not plan.events):
                    fresh = True  # answer refusals and no-ops from the caught-up state
                    continue
                if not plan.events:
                    return Written(plan.result, max(position, self._follower.seq), False)
                data = encode_batch(signed(plan.events, access.caller().subject))
                if len(data) > self.max_envelope_bytes:
                    raise invalid(
                        "",
                        f"the request encodes to {len(data)} bytes, more than one log message "
                        f"holds ({self.max_envelope_bytes}); split it",
                    )
                expected = self._follower.last_on_subject.get(self.subject, 0)
                callers = plan.callers or (traces.current(),) * len(plan.events)
                spans = AppendSpans(callers, self.subject)
                try:
                    seq = await self._log.append(
                        self.subject,
                        data,
                        msg_id=plan.msg_id or fallback_msg_id,
                        expected_last_subject_seq=expected,
                        headers=spans.header,
                    )
                except FencedAppendError:
                    log.debug("request append fenced at subject seq %d; planning again", expected)
                    fresh = True
                    continue
                finally:
                    spans.end()
                self.last_seq = max(self.last_seq, seq)
                log.debug(
                    "request appended seq=%d events=%d", seq, len(plan.events), extra={"seq": seq}
                )
                return Written(plan.result, seq, True)
        raise TransientAdmissionError(
            f"the request was fenced {self._max_fenced_retries} times by other writers; retry"
        )


def signed(events: list[Event], principal: str) -> list[Event]:
    """Every request event records who asked: the caller of this write, unless the
    planner planned several callers' requests together and named each one's."""
    return [
        msgspec.structs.replace(e, principal=principal)
        if isinstance(e, Request) and not e.principal
        else e
        for e in events
    ]
