"""A container's output copied into the attempt's live log file, as the process runtime
writes it there: `docker logs --follow`, stdout and stderr into one file, in order.

The copy starts when the container does (or is adopted: `docker logs` replays from
the start, so the file is written anew) and ends when the container stops; the
agent then keeps the file like any attempt's log (`qm_node_agent.joblogs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

log = logging.getLogger(__name__)

FINISH_TIMEOUT_S = 10.0  # after the container exits, for the copy to write its last bytes


class LogCopier:
    def __init__(self, binary: str, container: str, path: Path) -> None:
        self._binary = binary
        self._container = container
        self._path = path
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> LogCopier:
        try:
            with open(self._path, "wb") as output:  # the child keeps its own descriptor
                self._proc = await asyncio.create_subprocess_exec(
                    self._binary,
                    "logs",
                    "--follow",
                    self._container,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=output,
                    stderr=output,
                )
        except OSError as err:  # the job runs on; only its log is missing
            log.warning("cannot copy the logs of %s: %s", self._container, err)
        return self

    async def finish(self) -> None:
        """Once the container exited: let the copy end by itself, else stop it."""
        if self._proc is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._proc.wait(), FINISH_TIMEOUT_S)
        await self.stop()

    async def stop(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
