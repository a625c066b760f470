"""The pure scheduling core: `fold(state, event) -> state` and `decide(state) -> decisions`.

No I/O, no clocks, no randomness: time and ids come from the events, so a
replay of the log reproduces every state and every decision. On top of those,
pure reads: why a job waits (`why_waiting`) and what a submission would do
(`dry_run`).
"""

from quartermaster.core.decide import PassPolicy, decide, settle
from quartermaster.core.dry_run import DryRun, dry_run
from quartermaster.core.fold import fold, fold_all
from quartermaster.core.fork import fork
from quartermaster.core.model import Host, HostStatus, Job, JobStatus, StopCause, WarmPool
from quartermaster.core.state import State
from quartermaster.core.wait_reasons import WaitCode, WaitReason
from quartermaster.core.waiting import Explainer, why_waiting

__all__ = [
    "DryRun",
    "Explainer",
    "Host",
    "HostStatus",
    "Job",
    "JobStatus",
    "PassPolicy",
    "State",
    "StopCause",
    "WaitCode",
    "WaitReason",
    "WarmPool",
    "decide",
    "dry_run",
    "fold",
    "fold_all",
    "fork",
    "settle",
    "why_waiting",
]
