"""`/readyz` and `/livez` from the services' real state, against a real nats-server: a
follower that stops or falls behind makes its service not ready, and ready again once it
has caught up; both schedulers are ready, one leading and one standing by."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any

from prometheus_client import CollectorRegistry

from qm_scheduler.__main__ import health_checks as scheduler_checks
from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from qm_warmpool.__main__ import health_checks as warmpool_checks
from qm_warmpool.service import WarmPoolService
from qm_warmpool.settings import WarmPoolSettings
from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog import encode_batch, subjects
from quartermaster.events import AnyEvent
from quartermaster.health import Health
from quartermaster.metrics import MetricsServer

MAX_LAG_S = 0.5  # readiness drops once a message has waited this long unfolded
WAIT_S = 15.0

Reply = tuple[int, dict[str, Any]]


def get(url: str) -> Reply:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return int(reply.status), json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return int(err.code), json.loads(err.read())


@contextlib.contextmanager
def endpoint(checks: Health) -> Any:
    server = MetricsServer(CollectorRegistry(), 0, health=checks)
    try:
        yield lambda path: asyncio.to_thread(get, f"{server.base()}/{path}")
    finally:
        server.close()


async def probe_until(
    probe: Callable[[str], Any], path: str, wanted: Callable[[Reply], bool]
) -> Reply:
    """Probe as a kubelet would (every 0.2 s here) until a reply is `wanted`."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        reply: Reply = await probe(path)
        if wanted(reply):
            return reply
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{path} never gave the reply wanted; last: {reply}")
        await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def running(service: Scheduler | WarmPoolService) -> AsyncIterator[None]:
    task = asyncio.create_task(service.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def append_one(log: JetStreamLog, at: float) -> int:
    tick = encode_batch([ev.ClockTicked(at=at)])
    return await log.append(subjects.timers(log.prefix), tick)


def ready(reply: Reply) -> bool:
    return reply[0] == 200


def not_ready(reply: Reply) -> bool:
    return reply[0] == 503


async def test_a_warm_pool_service_whose_fold_is_stuck_is_live_but_not_ready(
    jetstream_log: JetStreamLog,
) -> None:
    service = WarmPoolService(WarmPoolSettings(tick_seconds=3600), jetstream_log)
    gate = asyncio.Event()
    gate.set()

    async def slow_fold(seq: int, subject: str, events: list[AnyEvent]) -> None:
        await gate.wait()  # a fold that cannot go on (a stuck listener, a long GC)

    service.follower.listen(slow_fold)
    with endpoint(warmpool_checks(service, MAX_LAG_S)) as probe:
        async with running(service):
            _, body = await probe_until(probe, "readyz", ready)
            assert body["checks"]["log"]["ok"] and body["checks"]["nats"]["ok"]

            gate.clear()
            await append_one(jetstream_log, 1.0)  # folded; its listener holds the fold up
            await append_one(jetstream_log, 2.0)  # so this one waits
            _, body = await probe_until(probe, "readyz", not_ready)
            assert body["checks"]["log"]["ok"] is False, body
            assert "behind for" in body["checks"]["log"]["detail"]
            assert body["checks"]["nats"]["ok"]
            assert (await probe("livez"))[0] == 200  # its loops run: no restart wanted

            gate.set()
            _, body = await probe_until(probe, "readyz", ready)
            assert body["checks"]["log"]["detail"].startswith("caught up")


async def test_a_scheduler_whose_follower_stopped_is_not_ready_until_it_reads_again(
    jetstream_log: JetStreamLog,
) -> None:
    def scheduler(name: str) -> Scheduler:
        return Scheduler(SchedulerSettings(instance_id=name, boot_id=name), jetstream_log)

    first, second = scheduler("s1"), scheduler("s2")
    with (
        endpoint(scheduler_checks(first, MAX_LAG_S)) as probe_first,
        endpoint(scheduler_checks(second, MAX_LAG_S)) as probe_second,
    ):
        async with running(first):
            await probe_until(
                probe_first,
                "readyz",
                lambda r: ready(r) and "leading" in r[1]["checks"]["leadership"]["detail"],
            )
            async with running(second):
                _, body = await probe_until(probe_second, "readyz", ready)
                assert body["checks"]["leadership"]["detail"] == "standing by"

                assert first.follower is not None
                await first.follower.stop()
                await append_one(jetstream_log, 1.0)
                code, body = await probe_until(
                    probe_first, "readyz", lambda r: not r[1]["checks"]["log"]["ok"]
                )
                assert code == 503 and "behind for" in body["checks"]["log"]["detail"]
                assert body["checks"]["follower"] == {
                    "ok": False,
                    "detail": "log follower not started",
                }
                assert (await probe_first("livez"))[0] == 503  # a dead loop: restart it
                assert (await probe_second("readyz"))[0] == 200  # the standby is fine

                await first.follower.start()
                _, body = await probe_until(probe_first, "readyz", ready)
                assert body["checks"]["log"]["detail"].startswith("caught up")


async def test_a_scheduler_whose_host_relay_ended_is_not_live(jetstream_log: JetStreamLog) -> None:
    """The relay is the only publisher of the hosts' views: one that ended (an error in its
    loop) would leave every agent without work, so the process asks to be restarted."""
    scheduler = Scheduler(SchedulerSettings(instance_id="s1", boot_id="s1"), jetstream_log)
    with endpoint(scheduler_checks(scheduler, MAX_LAG_S)) as probe:
        async with running(scheduler):
            _, body = await probe_until(probe, "livez", lambda r: r[0] == 200)
            assert body["checks"]["host relay"] == {"ok": True, "detail": "host view relay running"}
            assert scheduler.relay is not None and scheduler.relay.task is not None
            scheduler.relay.task.cancel()
            _, body = await probe_until(probe, "livez", lambda r: r[0] == 503)
            assert body["checks"]["host relay"] == {"ok": False, "detail": "host view relay ended"}
