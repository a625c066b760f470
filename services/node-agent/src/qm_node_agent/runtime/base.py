"""The container runtime port: start a job, find it again after a restart, stop it."""

from __future__ import annotations

from typing import Protocol

import msgspec

from qm_node_agent.launch import LaunchSpec
from qm_node_agent.records import AttemptRecord
from quartermaster.events import StartPhases

LOG_TAIL_BYTES = 2048


class ExitStatus(msgspec.Struct, frozen=True):
    exit_code: int
    start_error: str | None = None  # the command could not be started: a client error
    infrastructure_error: str | None = None  # the host could not run it (the wrapper's log)


class RunningJob(Protocol):
    """One host's part of an attempt, started or adopted."""

    @property
    def pid(self) -> int | None: ...

    # How long each start phase took; None when the runtime does not measure them.
    start_phases: StartPhases | None

    async def wait(self) -> ExitStatus:
        """Until the job exits. Raises `RuntimeFailure` when the runtime loses it."""
        ...

    async def stop(self, grace_s: float) -> None:
        """SIGTERM, up to `grace_s` to exit, then SIGKILL; `wait()` then returns."""
        ...

    async def log_tail(self) -> str:
        """The end of the job's output (at most LOG_TAIL_BYTES)."""
        ...

    async def remove(self) -> None:
        """Free what the job leaves behind, once its outcome is reported."""
        ...


class JobRuntime(Protocol):
    kind: str

    async def ping(self) -> str:
        """Whether the runtime answers, in words (health checks). Raises `RuntimeFailure`
        when it does not."""
        ...

    async def launch(self, spec: LaunchSpec, record: AttemptRecord) -> RunningJob:
        """Start the job. Raises `LaunchError` (client or infrastructure) when it cannot."""
        ...

    async def adopt(self, record: AttemptRecord) -> RunningJob | None:
        """The job of a record from before a restart, running or exited; None if lost."""
        ...

    async def forget(self, record: AttemptRecord) -> None:
        """Remove what is left of a finished attempt whose outcome was already reported."""
        ...

    async def release(self, keep: set[str]) -> None:
        """Free what warm pool chains other than `keep` hold on this host."""
        ...


def tail(text: bytes) -> str:
    """The last LOG_TAIL_BYTES of some output, cut at a character boundary."""
    return text[-LOG_TAIL_BYTES:].decode("utf-8", errors="ignore")
