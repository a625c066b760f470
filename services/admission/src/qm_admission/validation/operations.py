"""Operator requests on what the system runs: warm-pool keep-alive and host drains."""

from __future__ import annotations

from qm_admission.errors import failed_precondition, invalid
from qm_admission.validation import common
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import HostStatus, State
from quartermaster.core.model import TERMINAL_STATUSES, WarmPoolStatus


def update_warm_pool(
    request: pb.UpdateWarmPoolRequest, state: State, *, at: float, max_keep_alive_seconds: int
) -> list[ev.Event]:
    """Change the keep-alive of a job's Available pool, or of a running job's future pool."""
    job = common.job(state, "job_id", request.job_id)
    seconds = request.keep_alive_period_in_seconds
    if not 0 <= seconds <= max_keep_alive_seconds:
        raise invalid(
            "keep_alive_period_in_seconds",
            f"must be 0-{max_keep_alive_seconds} (0 terminates the pool), got {seconds}",
        )
    pool = state.pools.get(job.job_id)
    pool_open = pool is not None and pool.status in (
        WarmPoolStatus.AVAILABLE,
        WarmPoolStatus.IN_USE,
    )
    if job.status in TERMINAL_STATUSES and not pool_open and not job.retained:
        raise failed_precondition(
            "job_id", f"job {job.job_id} is {job.status.value} and has no Available warm pool"
        )
    # The scheduler's next pass decides the pool's new expiry (and records it).
    return [
        ev.WarmPoolKeepAliveUpdated(
            at=at, job_id=job.job_id, keep_alive_seconds=seconds, pass_decides_expiry=True
        )
    ]


def drain_node(request: pb.DrainNodeRequest, state: State, *, at: float) -> list[ev.Event]:
    """Drain a healthy host; draining a drained host again writes nothing."""
    host = common.host(state, "host_id", request.host_id)
    if host.status is HostStatus.DRAINED:
        return []
    if host.status is not HostStatus.HEALTHY:
        raise failed_precondition("host_id", f"host {host.host_id} is {host.status.value}")
    return [ev.HostDrained(at=at, host_id=host.host_id)]


def undrain_node(request: pb.UndrainNodeRequest, state: State, *, at: float) -> list[ev.Event]:
    """Undrain a drained host; undraining a host that is not drained writes nothing."""
    host = common.host(state, "host_id", request.host_id)
    if not host.drained:
        return []
    return [ev.HostUndrained(at=at, host_id=host.host_id)]
