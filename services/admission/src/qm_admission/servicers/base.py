"""What every servicer shares: the backends, and the write-then-announce step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from qm_admission.consistency import Consistency, announce, seq_in_trailer
from qm_admission.ports import ReadModelPort
from qm_admission.roles import RoleFile
from qm_admission.settings import Settings
from qm_admission.watch import JobWatchHub
from qm_admission.writer import Plan, RequestWriter, Written
from quartermaster.bus.liveness import LivenessWatch
from quartermaster.core import State
from quartermaster.eventlog import LogFollower
from quartermaster.events import Event

Validator = Callable[[State, float], list[Event]]


class Backends(msgspec.Struct, frozen=True, kw_only=True):
    settings: Settings
    writer: RequestWriter
    follower: LogFollower
    consistency: Consistency
    read_model: ReadModelPort
    hub: JobWatchHub
    liveness: LivenessWatch | None = None  # hosts' heartbeats (a KV bucket, not the log)
    roles: RoleFile | None = None  # the execution roles jobs may name (None: any)


async def write(backends: Backends, context: Any, validate: Validator) -> Written[None]:
    """Validate on the caught-up state, append, and send `x-qm-seq` to the client."""
    in_trailer = seq_in_trailer(context)
    written = await backends.writer.write(lambda state, now: Plan(validate(state, now), None))
    await announce(context, written.seq, in_trailer)
    return written
