"""`python -m qm_node_agent` / `qm-node-agent`: run the agent until SIGTERM or SIGINT.

Stopping leaves running jobs alone; the next agent on this host re-adopts them.
"""

from __future__ import annotations

import asyncio
import sys

from prometheus_client import CollectorRegistry

from qm_node_agent.agent import NodeAgent
from qm_node_agent.errors import RuntimeFailure, SettingsError
from qm_node_agent.settings import PREFIX, NodeSettings
from quartermaster import health, telemetry
from quartermaster.eventlog import LogFollower, process
from quartermaster.metrics import NodeMetrics, serving

# A heartbeat older than this many periods: the agent is not keeping its host alive.
HEARTBEAT_PERIODS = 3


def health_checks(agent: NodeAgent, settings: NodeSettings) -> health.Health:
    """Live: its read loop and heartbeat loop run. Ready: started, on the bus, caught up,
    heartbeats stored recently and the runtime answering (docker: the engine)."""
    checks = health.Health()
    beat_age = HEARTBEAT_PERIODS * settings.heartbeat_seconds

    def reader() -> asyncio.Task[None] | None:
        side = agent.read_side
        return None if side is None else side.reader

    def started() -> health.Verdict:
        return health.passing("ready") if agent.ready else health.failing("not started")

    def nats() -> health.Verdict:
        event_log = agent.event_log
        if event_log is None:
            return health.failing("not connected yet")
        return health.connected(lambda: event_log.nc.is_connected)()

    def position() -> int:
        side = agent.read_side
        if side is None:
            return 0
        return side.seq if isinstance(side, LogFollower) else side.feed_seq

    async def end() -> int:
        side, event_log = agent.read_side, agent.event_log
        assert side is not None and event_log is not None
        return await (event_log.last_seq() if isinstance(side, LogFollower) else side.feed_end())

    # The whole log, or this host's feed (each view is the whole of what the host must do).
    fresh = health.caught_up(
        position,
        end,
        settings.ready_max_lag_seconds,
        "seq" if settings.read_whole_log else "feed seq",
    )

    async def log_position() -> health.Verdict:
        if agent.read_side is None or agent.event_log is None:
            return health.failing("not reading yet")
        return await fresh()

    async def runtime() -> health.Verdict:
        try:
            return health.passing(await agent.runtime.ping())
        except RuntimeFailure as err:
            return health.failing(str(err))

    checks.live("follower", health.running(reader, "log reader"))
    checks.live("heartbeats", health.recent(lambda: agent.beat_sent, beat_age, "heartbeat sent"))
    checks.ready("agent", started)
    checks.ready("nats", nats)
    checks.ready("log", log_position)
    checks.ready(
        "heartbeat", health.recent(lambda: agent.beat_stored, beat_age, "heartbeat stored")
    )
    checks.ready("runtime", runtime)
    return checks


async def serve(settings: NodeSettings) -> None:
    registry = CollectorRegistry()
    agent = NodeAgent(settings, metrics=NodeMetrics(registry))
    loop = asyncio.get_running_loop()
    if settings.lifeline_fd is not None:
        fd = settings.lifeline_fd

        def orphaned() -> None:  # readable means EOF: whoever started us is gone
            loop.remove_reader(fd)
            agent.stop()

        loop.add_reader(fd, orphaned)
    checks = health_checks(agent, settings)
    with (
        process.stop_signals("qm-node-agent", agent.stop),
        serving(registry, settings.metrics_port, settings.metrics_host, checks),
    ):
        await agent.run()


def main() -> None:
    with telemetry.running("qm-node-agent", PREFIX):
        try:
            settings = NodeSettings.from_env()
        except SettingsError as err:
            print(f"qm-node-agent: {err}", file=sys.stderr)
            sys.exit(2)
        with telemetry.logs.scope(host=settings.host_id):
            process.run(serve(settings))


if __name__ == "__main__":
    main()
