"""`python -m qm_scheduler`: the scheduler's composition root."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from quartermaster.bus import JetStreamLog


async def serve(settings: SchedulerSettings) -> None:
    async with await JetStreamLog.connect(
        settings.nats_url, settings.stream, settings.subject_prefix, connection_name="qm-scheduler"
    ) as event_log:
        task = asyncio.create_task(Scheduler(settings, event_log).run())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(serve(SchedulerSettings.from_env()))


if __name__ == "__main__":
    main()
