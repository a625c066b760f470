"""Group commit of submissions: concurrent calls share one planned, fenced append.

The writer appends one envelope at a time and waits for it to be folded before
planning the next (a plan must see this process's own writes). Calls that arrive
while an append is in flight, or while the writer folds it, queue here; the next
append plans all of them together (the group is taken when the writer plans, not
before it waits), so 64 calls in flight cost a few appends instead of 64. Before
it takes the group, the planner lets the loop run once: calls this process has
already received, a step short of the queue (in an interceptor, say), join it
(on a loaded admission, 1.8 calls an append instead of 1.5, and 20 % less CPU a
call). That is one turn of the loop, not a linger window: a lone call waits for
no timer.

Under load the planner lingers, as PostgreSQL's `commit_delay` does only when
`commit_siblings` transactions are active: when calls already wait behind the
first once that turn has run, or the last group held more than one call, it
waits while calls keep coming (a gap of `linger_gap_seconds` with none ends the
wait), until the queue fills an envelope, for `linger_seconds` at most. Each
append costs its fold, projection and pass whatever its size, so on a busy
admission bigger groups make cheaper calls: with 64 calls in flight in `qm up`,
groups went from 1.6 calls to about 12 and the CPU per call from 3.0 to 1.3 ms
(bench/submit_bench.py). Each call is
answered only once the envelope holding its jobs is durable in the stream, with
its own outcomes; client tokens, share scope and read-your-writes are those of the
planner and the writer, unchanged. A group holds at most `max_jobs` jobs and about
`max_bytes` of requests, so its envelope stays under one log message; a single
call above that goes alone (and gets the writer's answer on its size).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from functools import partial

import msgspec

from qm_admission import access, tracing
from qm_admission.submission import Outcome, SubmissionPlanner
from qm_admission.writer import Plan, RequestWriter, Written
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.auth import Principal
from quartermaster.core import State
from quartermaster.telemetry import traces

log = logging.getLogger(__name__)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _Call(msgspec.Struct, kw_only=True):
    principal: Principal
    requests: list[pb.SubmitServiceJobRequest]
    size: int
    answer: asyncio.Future[Written[list[Outcome]]]
    trace: str | None = None  # the traceparent the call was made under (tracing on)


class SubmitGroups:
    def __init__(
        self,
        writer: RequestWriter,
        planner: SubmissionPlanner,
        *,
        max_jobs: int = 1000,
        max_bytes: int = 256 * 1024,
        linger_seconds: float,  # `Settings.submit_linger_seconds`: its one default
        linger_gap_seconds: float = 0.001,
    ) -> None:
        self._writer = writer
        self._planner = planner
        self._max_jobs = max_jobs
        self._max_bytes = max_bytes
        self._linger = linger_seconds
        self._linger_gap = linger_gap_seconds
        self._queued: deque[_Call] = deque()
        self._queued_jobs = 0  # in `_queued`, kept as calls come and go
        self._queued_bytes = 0
        self._last_group = 0  # calls in the group planned last
        self._lingering: asyncio.Future[None] | None = None  # woken once an envelope is full
        self._drainer: asyncio.Task[None] | None = None
        self.appends = 0  # envelopes written (figures for benchmarks and tests)
        self.calls = 0  # calls answered from them

    async def submit(self, requests: list[pb.SubmitServiceJobRequest]) -> Written[list[Outcome]]:
        """Plan and append `requests` as the calling principal, grouped with other calls."""
        answer: asyncio.Future[Written[list[Outcome]]] = asyncio.get_running_loop().create_future()
        size = sum(r.ByteSize() for r in requests)
        call = _Call(
            principal=access.caller(),
            requests=requests,
            size=size,
            answer=answer,
            trace=traces.current(),
        )
        self._queued.append(call)
        self._queued_jobs += len(requests)
        self._queued_bytes += size
        if self._lingering is not None and self._fills_an_envelope():
            _wake(self._lingering)
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="qm-submit-groups")
        # A cancelled call (client gone) cancels its own answer only: its jobs stay in the
        # group and may be written, and the drainer skips an answer already done. No
        # `shield` and no done callback: each would cost a loop turn between the
        # append's ack and every caller's answer.
        try:
            return await answer
        except asyncio.CancelledError:
            if answer.done() and not answer.cancelled():
                answer.exception()  # cancelled as it was answered: asyncio would warn
            raise

    async def _drain(self) -> None:
        while self._queued:
            group: list[_Call] = []  # taken when first planned (see `_plan`)
            try:
                written = await self._writer.write(partial(self._plan, group))
            except BaseException as err:  # every waiting caller gets the error
                group = group or self._take()
                for call in group:
                    if not call.answer.done():
                        call.answer.set_exception(err)
                if isinstance(err, asyncio.CancelledError):
                    raise
                continue
            self.appends += written.appended
            self.calls += len(group)
            for call, outcomes in zip(group, written.result, strict=True):
                if not call.answer.done():
                    call.answer.set_result(Written(outcomes, written.seq, written.appended))

    async def _plan(
        self, group: list[_Call], state: State, now: float
    ) -> Plan[list[list[Outcome]]]:
        """The group's plan; with tracing on, each event names its own caller's trace.

        The group is taken from the queue on the first try, once the writer holds its
        lock and has folded its previous append: calls that came in during that wait
        join this group instead of waiting for the next. A re-plan (fenced, or checked
        again caught up) plans the same group.
        """
        if not group:
            await asyncio.sleep(0)  # one turn: calls a step from the queue join (see above)
            if self._linger > 0 and (len(self._queued) > 1 or self._last_group > 1):
                await self._gather()
            group.extend(self._take())
            self._last_group = len(group)
        calls = [(call.principal, call.requests) for call in group]
        plan = await self._planner.plan_group(calls, state, now)
        traced = [call.trace for call in group]
        if not any(traced):
            return plan
        callers = tracing.callers_of(plan.events, plan.result, traced)
        return msgspec.structs.replace(plan, callers=callers)

    async def _gather(self) -> None:
        """Linger under load (see the module's docstring): until the queue fills an
        envelope, `linger_seconds` pass, or a gap passes with no new call."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._linger
        while not self._fills_an_envelope():
            left = deadline - loop.time()
            if left <= 0:
                return
            before = len(self._queued)
            self._lingering = waiter = loop.create_future()
            timer = loop.call_later(min(self._linger_gap, left), _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._lingering = None
            if len(self._queued) == before:
                return

    def _fills_an_envelope(self) -> bool:
        return self._queued_jobs >= self._max_jobs or self._queued_bytes >= self._max_bytes

    def _take(self) -> list[_Call]:
        """The oldest calls that fit one envelope (always at least one)."""
        group = [self._queued.popleft()]
        jobs, size = len(group[0].requests), group[0].size
        while self._queued:
            nxt = self._queued[0]
            if jobs + len(nxt.requests) > self._max_jobs or size + nxt.size > self._max_bytes:
                break
            group.append(self._queued.popleft())
            jobs += len(nxt.requests)
            size += nxt.size
        self._queued_jobs -= jobs
        self._queued_bytes -= size
        if len(group) > 1:
            log.debug("group commit of %d calls, %d jobs", len(group), jobs)
        return group
