"""`python -m qm_node_agent` / `qm-node-agent`: run the agent until SIGTERM or SIGINT.

Stopping leaves running jobs alone; the next agent on this host re-adopts them.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from prometheus_client import CollectorRegistry

from qm_node_agent.agent import NodeAgent
from qm_node_agent.errors import SettingsError
from qm_node_agent.settings import PREFIX, NodeSettings
from quartermaster import telemetry
from quartermaster.metrics import NodeMetrics, serving


async def serve(settings: NodeSettings) -> None:
    registry = CollectorRegistry()
    agent = NodeAgent(settings, metrics=NodeMetrics(registry))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, agent.stop)
    if settings.lifeline_fd is not None:
        fd = settings.lifeline_fd

        def orphaned() -> None:  # readable means EOF: whoever started us is gone
            loop.remove_reader(fd)
            agent.stop()

        loop.add_reader(fd, orphaned)
    with serving(registry, settings.metrics_port, settings.metrics_host):
        await agent.run()


def main() -> None:
    with telemetry.running("qm-node-agent", PREFIX):
        try:
            settings = NodeSettings.from_env()
        except SettingsError as err:
            print(f"qm-node-agent: {err}", file=sys.stderr)
            sys.exit(2)
        with telemetry.logs.scope(host=settings.host_id):
            asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
