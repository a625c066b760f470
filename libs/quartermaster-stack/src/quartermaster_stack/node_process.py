"""A node agent in a process of its own (`qm up --node-processes`), as on a host of its own.

The agent gets its settings by environment (`NodeSettings.to_env`), logs as the
stack does (format and level), and gets a lifeline:
the read end of a pipe whose write end only the stack holds, so an agent whose
stack is gone (stopped, crashed, killed) stops too instead of running on beside
the next `qm up`'s agent for the same host. Stopping leaves running jobs alone,
as a stopped agent always does: the next agent on the host adopts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable

from qm_node_agent.settings import PREFIX, NodeSettings
from quartermaster.telemetry import logs


class NodeProcess:
    def __init__(
        self,
        host: str,
        process: subprocess.Popen[bytes],
        lifeline: int,
        registered: Callable[[], bool],
    ) -> None:
        self.host = host
        self.process = process
        self._lifeline = lifeline  # the pipe's write end: closed, the agent stops
        self._registered = registered

    @classmethod
    def spawn(cls, settings: NodeSettings, registered: Callable[[], bool]) -> NodeProcess:
        read_end, write_end = os.pipe()  # `pass_fds` makes the read end the child's
        # Only these settings: a QM_NODE_* variable of the stack's own shell (a GPU count,
        # say) must not fill in one that `to_env` leaves unset to mean "the default".
        inherited = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)}
        log_format, log_level = logs.current()  # its lines read like the stack's own
        env = {
            **inherited,
            **settings.to_env(),
            f"{PREFIX}LOG_FORMAT": log_format.value,
            f"{PREFIX}LOG_LEVEL": log_level,
            f"{PREFIX}LIFELINE_FD": str(read_end),
        }
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "qm_node_agent"],
                env=env,
                stdin=subprocess.DEVNULL,
                pass_fds=(read_end,),
                start_new_session=True,  # the stack's Ctrl-C is its to pass on, not the tty's
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return cls(settings.host_id, process, write_end, registered)

    @property
    def ready(self) -> bool:
        """Registered in the log by this process; an agent that exited raises."""
        code = self.process.poll()
        if code is not None:
            raise RuntimeError(f"node agent {self.host} exited with status {code}")
        return self._registered()

    async def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL past `timeout`; the lifeline closes either way."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(self.process.wait, timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            await asyncio.to_thread(self.process.wait)
        finally:
            with contextlib.suppress(OSError):
                os.close(self._lifeline)
