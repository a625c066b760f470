"""The event log as the services use it: envelopes, subjects and the folding follower.

`LogFollower` needs the `bus` extra (nats-py) and is imported on first use, so
envelopes and subjects work where only the core is installed (offline audits).
"""

from typing import TYPE_CHECKING, Any

from quartermaster.eventlog import subjects
from quartermaster.eventlog.envelope import decode_batch, encode_batch

if TYPE_CHECKING:
    from quartermaster.eventlog.follower import LogFollower


def __getattr__(name: str) -> Any:
    if name == "LogFollower":
        from quartermaster.eventlog.follower import LogFollower

        return LogFollower
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LogFollower", "decode_batch", "encode_batch", "subjects"]
