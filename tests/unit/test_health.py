"""The health model: how far behind a follower is, what `/livez` and `/readyz` answer."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from quartermaster import health
from quartermaster.health import LogLag
from quartermaster.metrics import MetricsServer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "probes, lag",
    [
        # (seconds since start, follower position, log end) at each probe -> last lag
        ([(0, 5, 5)], 0.0),  # caught up
        ([(0, 5, 9)], 0.0),  # behind, first seen now
        ([(0, 5, 9), (4, 5, 9)], 4.0),  # stuck: the same message waits
        ([(0, 5, 9), (4, 9, 12), (6, 10, 12)], 2.0),  # keeps up: only the newer end waits
        ([(0, 5, 9), (4, 12, 12), (6, 12, 13)], 0.0),  # caught up between: starts again
        ([(0, 5, 9), (3, 5, 11), (5, 9, 11)], 2.0),  # 9 reached, 11 waits since second 3
    ],
)
def test_the_lag_is_the_age_of_the_oldest_end_not_reached(
    probes: list[tuple[float, int, int]], lag: float
) -> None:
    clock = Clock()
    tracker = LogLag(clock)
    seen = 0.0
    for at, position, end in probes:
        clock.now = 100.0 + at
        seen = tracker.observe(position, end)
    assert seen == lag


def test_a_report_is_ok_only_when_every_check_passes() -> None:
    ready = health.Report({"nats": health.passing("connected"), "log": health.passing("ok")})
    not_ready = health.Report({"nats": health.passing("connected"), "log": health.failing("x")})
    assert (ready.ok, ready.status_code) == (True, 200)
    assert (not_ready.ok, not_ready.status_code) == (False, 503)
    body = json.loads(not_ready.body("ready"))
    assert body == {
        "status": "not ready",
        "checks": {
            "nats": {"ok": True, "detail": "connected"},
            "log": {"ok": False, "detail": "x"},
        },
    }


async def test_a_slow_or_broken_check_fails_with_its_reason() -> None:
    checks = health.Health(check_timeout=0.2)

    async def slow() -> health.Verdict:
        await asyncio.sleep(10)
        return health.passing("never")

    def broken() -> health.Verdict:
        raise ValueError("no state")

    checks.live("loop", lambda: health.passing("running"))
    checks.ready("slow", slow)
    checks.ready("broken", broken)
    live, ready = await checks.liveness(), await checks.readiness()
    assert live.ok and set(live.checks) == {"event_loop", "loop"}
    assert not ready.ok and ready.checks["loop"].ok  # readiness includes liveness
    assert ready.checks["slow"].detail == "no answer within 0.2 s"
    assert "no state" in ready.checks["broken"].detail


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return int(err.code), json.loads(err.read())


async def test_livez_and_readyz_are_served_beside_metrics() -> None:
    checks = health.Health()
    connected = [True]
    checks.ready("nats", health.connected(lambda: connected[0]))
    server = MetricsServer(CollectorRegistry(), 0, health=checks)
    try:
        assert await asyncio.to_thread(get, f"{server.base()}/livez") == (
            200,
            {"status": "live", "checks": {"event_loop": {"ok": True, "detail": "answering"}}},
        )
        code, body = await asyncio.to_thread(get, f"{server.base()}/readyz")
        assert (code, body["status"], body["checks"]["nats"]["ok"]) == (200, "ready", True)
        connected[0] = False
        code, body = await asyncio.to_thread(get, f"{server.base()}/readyz")
        assert (code, body["status"]) == (503, "not ready")
        assert body["checks"]["nats"] == {"ok": False, "detail": "not connected to NATS"}
    finally:
        server.close()


async def test_a_blocked_event_loop_is_not_live() -> None:
    checks = health.Health(check_timeout=0.1)
    server = MetricsServer(CollectorRegistry(), 0, health=checks)
    try:
        probe = asyncio.get_running_loop().run_in_executor(None, get, f"{server.base()}/livez")
        time.sleep(1.5)  # the loop is blocked (a deadlock would look the same)
        code, body = await probe
    finally:
        server.close()
    assert code == 503
    assert body["checks"]["event_loop"]["ok"] is False
