"""The pure scheduling core: `fold(state, event) -> state` and `decide(state) -> decisions`.

No I/O, no clocks, no randomness: time and ids come from the events, so a
replay of the log reproduces every state and every decision.
"""

from quartermaster.core.decide import PassPolicy, decide, settle
from quartermaster.core.fold import fold, fold_all
from quartermaster.core.model import Host, HostStatus, Job, JobStatus, StopCause, WarmPool
from quartermaster.core.state import State

__all__ = [
    "Host",
    "HostStatus",
    "Job",
    "JobStatus",
    "PassPolicy",
    "State",
    "StopCause",
    "WarmPool",
    "decide",
    "fold",
    "fold_all",
    "settle",
]
