"""Liveness and readiness of a service, answered from its real state.

One model for every service: a `Health` holds named checks, and the service's
composition root registers its own (connected to NATS, its follower caught up,
leading or standing by, heartbeats written, the runtime answering). The
`/metrics` server serves them on `/livez` and `/readyz` (`metrics.http`): a
small JSON object naming each check and its state, 200 when every check
passes, 503 when one does not.

- Liveness: the process's loops are alive. Its event loop answers (a probe is
  itself run on the loop, so a blocked or deadlocked loop answers nothing) and
  the loops registered as liveness checks have not ended. It does not look at
  NATS: a pod restarted for a bus outage comes back to the same outage.
- Readiness: everything liveness says, and the checks that depend on the
  outside (the bus, the log, the database). A readiness check must not block:
  each runs on the loop under `check_timeout`, and one that does not answer in
  time fails with that reason.

How far behind the log a follower is, in seconds, is measured without any
clock but this process's: `LogLag` remembers since when the log has held a
message the follower has not folded (the stream's last sequence, read at each
probe). A follower that keeps up has nothing older than a probe interval;
one that stopped or is stuck behind a backlog grows older until it exceeds
the limit, and readiness drops until it has caught up again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping

import msgspec

log = logging.getLogger(__name__)

CHECK_TIMEOUT_SECONDS = 2.0


class Verdict(msgspec.Struct, frozen=True):
    """One check's state: `ok`, and why, in words an operator reads."""

    ok: bool
    detail: str


def passing(detail: str) -> Verdict:
    return Verdict(True, detail)


def failing(detail: str) -> Verdict:
    return Verdict(False, detail)


Check = Callable[[], Verdict | Awaitable[Verdict]]


class Report(msgspec.Struct, frozen=True):
    """What `/livez` or `/readyz` answers: every check's verdict; ok when all pass."""

    checks: dict[str, Verdict]

    @property
    def ok(self) -> bool:
        return all(verdict.ok for verdict in self.checks.values())

    @property
    def status_code(self) -> int:
        return 200 if self.ok else 503

    def body(self, kind: str) -> bytes:
        """`{"status": "ready", "checks": {"nats": {"ok": true, "detail": ...}}}`."""
        status = ("" if self.ok else "not ") + ("live" if kind == "live" else "ready")
        checks = {name: {"ok": v.ok, "detail": v.detail} for name, v in self.checks.items()}
        return json.dumps({"status": status, "checks": checks}, indent=1).encode() + b"\n"


class Health:
    """A service's checks. Create it on the loop that owns what the checks read.

    `live(name, check)`: a loop of the process is alive (also part of readiness).
    `ready(name, check)`: the service can do its work now.
    """

    def __init__(self, check_timeout: float = CHECK_TIMEOUT_SECONDS) -> None:
        self._loop = asyncio.get_running_loop()
        self._timeout = check_timeout
        self._live: dict[str, Check] = {}
        self._ready: dict[str, Check] = {}

    def live(self, name: str, check: Check) -> None:
        self._live[name] = check

    def ready(self, name: str, check: Check) -> None:
        self._ready[name] = check

    def include(self, part: str, other: Health) -> None:
        """Serve `other`'s checks too, as `<part>.<name>`, in place of the part's before
        (`qm up` answers for every service it runs on one endpoint)."""
        self.drop(part)
        for mine, theirs in ((self._live, other._live), (self._ready, other._ready)):
            mine.update({f"{part}.{name}": check for name, check in theirs.items()})

    def drop(self, part: str) -> None:
        """Forget `part`'s checks (`include` again when it runs again)."""
        for checks in (self._live, self._ready):
            for name in [n for n in checks if n.startswith(f"{part}.")]:
                del checks[name]

    async def liveness(self) -> Report:
        return Report(await self._run(self._live))

    async def readiness(self) -> Report:
        return Report(await self._run({**self._live, **self._ready}))

    async def _run(self, checks: Mapping[str, Check]) -> dict[str, Verdict]:
        verdicts = await asyncio.gather(*(self._one(name, c) for name, c in checks.items()))
        return {"event_loop": passing("answering"), **dict(zip(checks, verdicts, strict=True))}

    async def _one(self, name: str, check: Check) -> Verdict:
        try:
            async with asyncio.timeout(self._timeout):
                verdict = check()
                return await verdict if isinstance(verdict, Awaitable) else verdict
        except TimeoutError:
            return failing(f"no answer within {self._timeout:.1f} s")
        except Exception as err:  # a broken check says so; it never breaks the probe
            log.warning("health check %s failed: %r", name, err)
            return failing(f"check failed: {err!r}")

    def report(self, kind: str) -> Report:
        """`kind` "live" or "ready", from another thread (the HTTP server's): an event
        loop that does not answer within the check timeout (and a second) is not live."""
        wait_s = self._timeout + 1.0
        stuck = Report({"event_loop": failing(f"no answer within {wait_s:.1f} s")})
        if self._loop.is_closed():
            return Report({"event_loop": failing("stopped")})
        coro = self.liveness() if kind == "live" else self.readiness()
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the loop closed meanwhile
            coro.close()
            return Report({"event_loop": failing("stopped")})
        try:
            return future.result(wait_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            log.warning("health: the event loop did not answer within %.1f s", wait_s)
            return stuck
        except concurrent.futures.CancelledError:  # the loop is shutting down
            return Report({"event_loop": failing("stopping")})


class LogLag:
    """How long the log has held a message that a follower has not applied yet.

    Each `observe(position, end)` (the follower's position, the log's last
    sequence) notes when that end was first seen beyond the follower; the lag
    is the age of the oldest end not yet reached. Only this process's monotonic
    clock is used, so the server's clock and skew do not matter; the lag is
    known to within the interval between probes.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._ahead: deque[tuple[float, int]] = deque()  # (first seen, log end) past position

    def observe(self, position: int, end: int) -> float:
        now = self._clock()
        while self._ahead and self._ahead[0][1] <= position:
            self._ahead.popleft()
        if end > position and (not self._ahead or self._ahead[-1][1] < end):
            self._ahead.append((now, end))
        return now - self._ahead[0][0] if self._ahead else 0.0


def caught_up(
    position: Callable[[], int],
    end: Callable[[], Awaitable[int]],
    max_lag_seconds: float,
    what: str = "seq",
) -> Callable[[], Awaitable[Verdict]]:
    """Ready while the follower at `position()` is less than `max_lag_seconds` behind
    the log's `end()`; the detail gives both positions and the lag."""
    lag = LogLag()

    async def check() -> Verdict:
        last = await end()
        at = position()
        behind = lag.observe(at, last)
        if at >= last:
            return passing(f"caught up at {what} {at}")
        detail = f"at {what} {at} of {last}, behind for {behind:.1f} s (max {max_lag_seconds:g})"
        return Verdict(behind <= max_lag_seconds, detail)

    return check


def connected(is_connected: Callable[[], bool], what: str = "NATS") -> Callable[[], Verdict]:
    """Ready while the client says it is connected (nats-py reconnects by itself)."""

    def check() -> Verdict:
        return passing("connected") if is_connected() else failing(f"not connected to {what}")

    return check


def running(task: Callable[[], asyncio.Task[object] | None], what: str) -> Check:
    """Live while the task that `task()` names (None: not started yet) has not ended."""

    def check() -> Verdict:
        current = task()
        if current is None:
            return failing(f"{what} not started")
        if current.done():
            return failing(f"{what} ended")
        return passing(f"{what} running")

    return check


def recent(
    last: Callable[[], float | None],
    max_age_seconds: float,
    what: str,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Check:
    """Ready while `last()` (a monotonic time; None: never) is at most `max_age_seconds` old."""

    def check() -> Verdict:
        at = last()
        if at is None:
            return failing(f"no {what} yet")
        age = clock() - at
        detail = f"last {what} {age:.1f} s ago (max {max_age_seconds:g})"
        return Verdict(age <= max_age_seconds, detail)

    return check
