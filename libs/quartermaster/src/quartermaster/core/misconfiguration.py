"""Jobs that can never fit: they carry a reason and never block the jobs behind them."""

from __future__ import annotations

from typing import NamedTuple

from quartermaster.core.model import Job
from quartermaster.core.state import State
from quartermaster.events import SharingStrategy

ENV_MAX = "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE"
SHARE_MAX = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"


class Misfit(NamedTuple):
    text: str  # the statusReason
    needed: int
    allowed: int  # most instances the environment, or the share, can ever give


def most_share_can_hold(state: State, queue: str, share_name: str, unit: str) -> int:
    """Units a share could ever hold: its own limit, plus what it could ever borrow."""
    share = state.shares.get((queue, share_name))
    if share is None:
        return 0
    own = share.own(unit)
    if share.strategy is not SharingStrategy.LEND_AND_BORROW:
        return own
    env = state.environments[state.environment_of(queue)]
    env_max = env.max_capacity.get(unit, 0)
    peers_own = lendable = 0  # sums only: the peers in any order, in one walk
    for peer in state.queue_shares.get(queue, {}).values():
        if peer.name != share_name:
            peer_own = peer.own(unit)
            peers_own += peer_own
            if peer.strategy is not SharingStrategy.RESERVE:
                lendable += peer_own
    unassigned = max(0, env_max - own - peers_own)
    most = own + lendable + unassigned
    cap = share.cap(unit)
    return most if cap is None else min(most, cap)


def most_instances(state: State, queue: str, share_name: str, unit: str) -> int:
    """The largest job of this share and unit that can ever fit (larger ones are misfits)."""
    env = state.environments.get(state.environment_of(queue))
    if env is None:
        return 0
    return min(env.max_capacity.get(unit, 0), most_share_can_hold(state, queue, share_name, unit))


def misfit(state: State, job: Job) -> Misfit | None:
    env = state.environments.get(state.environment_of(job.queue))
    env_max = env.max_capacity.get(job.unit, 0) if env else 0
    if job.count > env_max:
        text = (
            f"{ENV_MAX} - needs {job.count} x {job.unit}; the service environment allows {env_max}"
        )
        return Misfit(text, job.count, env_max)
    share = state.shares.get((job.queue, job.share))
    if share is not None and job.count <= share.own(job.unit):
        return None  # a share can always hold its own limit: no need to sum its peers
    most = most_share_can_hold(state, job.queue, job.share, job.unit)
    if job.count > most:
        text = (
            f"{SHARE_MAX} - needs {job.count} x {job.unit}; quota share {job.share} "
            f"can hold at most {most}"
        )
        return Misfit(text, job.count, most)
    return None


def reason_for(state: State, job: Job) -> str | None:
    found = misfit(state, job)
    return found.text if found is not None else None
