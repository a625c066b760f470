"""`/metrics` over HTTP: collectors read the state on its own event loop."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from quartermaster.metrics import LogLagCollector, MetricsServer, StateCollector
from quartermaster.testing.builders import World, a_job


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return str(reply.read().decode())


async def test_a_scrape_reads_the_state_on_its_loop_and_the_log_end() -> None:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE")
    for name in ("a", "b"):
        w.submit(a_job(name=name).in_share("QS1"))
    w.pass_()
    registry = CollectorRegistry()
    registry.register(StateCollector(lambda: w.state))

    async def last_seq() -> int:
        return 40

    registry.register(LogLagCollector(last_seq, lambda: {"scheduler": 37}))
    server = MetricsServer(registry, 0)
    try:
        text = await asyncio.to_thread(fetch, server.url)  # the loop stays free to answer
    finally:
        server.close()
    assert 'quartermaster_pending_jobs{queue="q",reason="SHARE_AT_LIMIT",share="QS1"} 1.0' in text
    assert 'quartermaster_jobs{queue="q",share="QS1",status="SCHEDULED"} 1.0' in text
    assert 'quartermaster_log_consumer_lag_messages{consumer="scheduler"} 3.0' in text
    assert "quartermaster_log_last_sequence 40.0" in text


async def test_a_collector_is_never_scraped_on_its_own_loop() -> None:
    collector = StateCollector(lambda: None)
    with pytest.raises(RuntimeError, match="own loop"):
        list(collector.collect())
    assert await collector.families() == []


def test_a_scrape_after_the_loop_closed_yields_nothing() -> None:
    async def make() -> StateCollector:
        return StateCollector(lambda: World().state)

    loop = asyncio.new_event_loop()
    collector = loop.run_until_complete(make())
    loop.close()
    assert list(collector.collect()) == []
