"""Read-your-writes: reads wait until the read side has folded what a client wrote.

A write answers `x-qm-seq: <seq>` in its initial metadata, or, when the client
asks with `x-qm-seq-in: trailer`, in its trailing metadata: gRPC then sends it
with the status, while initial metadata of its own costs the server a separate
send before the reply. A read waits for the
projection (or the follower) to reach the larger of the `x-qm-min-seq` the client
sends and the newest envelope this process appended, so a client reads its own
writes through this process without any header, and through another with it.

A wait lasts at most the read timeout, and never past the call's own deadline:
then it ends with `DeadlineReached` (DEADLINE_EXCEEDED), just before the deadline,
instead of waiting on for a client that has given up.
"""

from __future__ import annotations

import grpc

from qm_admission.errors import DeadlineReached, ReadModelBehind, invalid
from qm_admission.ports import PositionPort
from qm_admission.validation.hostile import decimal
from qm_admission.writer import RequestWriter
from quartermaster.core import State
from quartermaster.eventlog import LogFollower

MIN_SEQ_KEY = "x-qm-min-seq"
SEQ_KEY = "x-qm-seq"
SEQ_IN_KEY = "x-qm-seq-in"  # where the client wants x-qm-seq: "initial" (default) or "trailer"
IN_TRAILER = "trailer"
IN_INITIAL = "initial"
# A wait this short still returns at once when the position is already there.
MIN_WAIT_SECONDS = 0.01
# A wait bounded by the call's deadline ends this long before it, so the server answers
# DEADLINE_EXCEEDED with its reason (and logs it) before gRPC cancels the call at the
# deadline itself: a reply sent at the deadline reaches no one.
DEADLINE_MARGIN_SECONDS = 0.05


def requested_min_seq(context: grpc.aio.ServicerContext) -> int:
    for key, value in context.invocation_metadata() or ():
        if key == MIN_SEQ_KEY:
            text = value.decode() if isinstance(value, bytes) else value
            return decimal(MIN_SEQ_KEY, text, "a log sequence number")
    return 0


def seq_in_trailer(context: grpc.aio.ServicerContext) -> bool:
    """Whether the client asked for `x-qm-seq` in the trailing metadata.

    Read before a write is made, so a bad value is refused before anything is appended.
    """
    for key, value in context.invocation_metadata() or ():
        if key == SEQ_IN_KEY:
            if value == IN_TRAILER:
                return True
            if value == IN_INITIAL:
                return False
            raise invalid(SEQ_IN_KEY, f"must be {IN_INITIAL!r} or {IN_TRAILER!r}")
    return False


async def announce(context: grpc.aio.ServicerContext, seq: int, in_trailer: bool) -> None:
    """Tell the client the log position its write is at (initial metadata: before the
    reply; trailing: with the status)."""
    seq_md = ((SEQ_KEY, str(seq)),)
    if in_trailer:
        context.set_trailing_metadata(seq_md)
    else:
        await context.send_initial_metadata(seq_md)


class Consistency:
    def __init__(
        self,
        writer: RequestWriter,
        follower: LogFollower,
        projection: PositionPort,
        timeout: float,
    ) -> None:
        self._writer = writer
        self._follower = follower
        self._projection = projection
        self._timeout = timeout

    def target(self, context: grpc.aio.ServicerContext) -> int:
        return max(requested_min_seq(context), self._writer.last_seq)

    def budget(self, context: grpc.aio.ServicerContext) -> tuple[float, bool]:
        """Seconds a wait may last, and whether the call's deadline is what bounds it."""
        remaining = context.time_remaining()
        if remaining is None or remaining >= self._timeout:
            return self._timeout, False
        return max(remaining - DEADLINE_MARGIN_SECONDS, MIN_WAIT_SECONDS), True

    async def projected(self, context: grpc.aio.ServicerContext) -> None:
        """Wait until the read model holds everything this read must see."""
        seq = self.target(context)
        if seq <= 0:
            return
        seconds, by_deadline = self.budget(context)
        try:
            await self._projection.wait_for(seq, seconds)
        except TimeoutError as err:
            raise _behind("the read model", seq, by_deadline) from err

    async def folded(self, context: grpc.aio.ServicerContext) -> State:
        """The follower's state once it holds everything this read must see."""
        seq = self.target(context)
        seconds, by_deadline = self.budget(context)
        try:
            await self._follower.wait_for(seq, seconds)
        except TimeoutError as err:
            raise _behind("the log follower", seq, by_deadline) from err
        return self._follower.state


def _behind(reader: str, seq: int, by_deadline: bool) -> ReadModelBehind | DeadlineReached:
    if by_deadline:
        return DeadlineReached(f"the call's deadline passed before {reader} reached log seq {seq}")
    return ReadModelBehind(f"{reader} did not reach log seq {seq} in time")
