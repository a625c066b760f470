"""Which decision subject each decision belongs to: its job queue, or host liveness."""

from __future__ import annotations

from collections import defaultdict

from quartermaster import events as ev
from quartermaster.core import State

HOSTS = "_hosts"


def queue_of(state: State, decision: ev.Event) -> str:
    if isinstance(decision, ev.HostLost):
        return HOSTS
    job_id = getattr(decision, "job_id", None)
    if job_id is not None and job_id in state.jobs:
        return state.jobs[job_id].queue
    if job_id is not None and job_id in state.pools:
        return state.pools[job_id].queue
    raise ValueError(f"decision {decision!r} names no known job, pool or host")


def by_queue(state: State, decisions: list[ev.Event]) -> dict[str, list[ev.Event]]:
    """Decisions grouped per queue, each group in the pass's order."""
    groups: dict[str, list[ev.Event]] = defaultdict(list)
    for decision in decisions:
        groups[queue_of(state, decision)].append(decision)
    return dict(groups)
