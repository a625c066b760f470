"""A host marked while its view is being published is published again, at once.

Found while heartbeats left the log: the relay dropped a mark made during an
in-flight publish (typically the next job's dispatch, folded right after the
previous job ended), and the view went out only at the next resync, seconds
later. Heartbeats had re-marked every host every 2 s and hidden it. Here the
resync is pushed out of reach, so only a kept mark can publish the change.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.core import HostStatus
from quartermaster.eventlog import LogFollower, encode_batch, host_relay, subjects
from quartermaster.eventlog.host_reader import HostFeedFollower
from quartermaster.eventlog.host_relay import HostRelay


async def until(what: str, predicate, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_a_mark_during_an_in_flight_publish_is_not_lost(
    jetstream_log: JetStreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_relay, "RESYNC_S", 3600.0)
    log = jetstream_log
    registered = ev.HostRegistered(at=1, host_id="h1", instance_type="ml.g5.xlarge")
    await log.append(subjects.reports("h1", log.prefix), encode_batch([registered]))
    follower = LogFollower(log)
    relay = HostRelay(follower)
    in_flight = asyncio.Event()
    release = asyncio.Event()
    publish = log.js.publish

    async def held_first(*args: Any, **kwargs: Any) -> Any:
        """The first view (already made) waits on the wire until released."""
        if not in_flight.is_set():
            in_flight.set()
            await release.wait()
        return await publish(*args, **kwargs)

    monkeypatch.setattr(log.js, "publish", held_first)
    reader = HostFeedFollower(log, "h1")
    await follower.start()
    await relay.start()
    await reader.start()
    try:
        await until("the first publish is in flight", in_flight.is_set)
        drained = ev.HostDrained(at=2, host_id="h1")
        seq = await log.append(subjects.requests(log.prefix), encode_batch([drained]))
        await follower.wait_for(seq)  # marked while the first view is still in flight
        release.set()
        await until(
            "h1's view shows the drain",
            lambda: (
                "h1" in reader.state.hosts and reader.state.hosts["h1"].status is HostStatus.DRAINED
            ),
        )
    finally:
        await reader.stop()
        await relay.stop()
        await follower.stop()
