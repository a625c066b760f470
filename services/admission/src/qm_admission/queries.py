"""Read requests checked against the folded state: names resolved, filters parsed.

Pure like `validation`: a request and the state in, the read-model query out, or
`RequestRejected` naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from qm_admission.errors import invalid
from qm_admission.names import Kind, reference
from qm_admission.paging import page_size
from qm_admission.translate import job_status_name
from qm_admission.validation import common
from qm_admission.validation.hostile import decimal
from qm_admission.watch import WatchFilter
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State

_POOL_STATUS = {
    pb.WARM_POOL_STATUS_AVAILABLE: "Available",
    pb.WARM_POOL_STATUS_IN_USE: "InUse",
    pb.WARM_POOL_STATUS_REUSED: "Reused",
    pb.WARM_POOL_STATUS_TERMINATED: "Terminated",
}


LIST_JOBS_FILTERS = (
    "JOB_NAME",
    "BEFORE_CREATED_AT",
    "AFTER_CREATED_AT",
    "QUOTA_SHARE_NAME",
    "SHARE_IDENTIFIER",
)
MAX_LIST_JOBS = 100  # AWS maxResults: 1-100


class JobsQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Arguments of `ReadModel.list_jobs`."""

    job_queue: str
    quota_share: str | None = None
    status: str | None = None
    job_name: str | None = None
    before_created_at: int | None = None
    after_created_at: int | None = None
    max_results: int = 100
    next_token: str | None = None


class PoolsQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Arguments of `ReadModel.list_pools`."""

    status: str | None = None
    job_queue: str | None = None
    max_results: int = 100
    next_token: str | None = None


class NodesQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Arguments of `ReadModel.list_hosts`."""

    service_environment: str | None = None
    state: str | None = None  # a NodeState name, e.g. NODE_STATE_DRAINED


def list_jobs(request: pb.ListServiceJobsRequest, state: State) -> JobsQuery:
    """AWS ListServiceJobs: one filter at most; no status and no filter lists RUNNING jobs.

    `quota_share_name` (a Quartermaster field) is the QUOTA_SHARE_NAME filter spelled
    as a field; giving both is refused when they differ.
    """
    queue = common.queue(state, "job_queue", request.job_queue)
    if request.job_status and request.job_status not in pb.JobStatus.values():
        raise invalid("job_status", f"unknown value {request.job_status}")
    if len(request.filters) > 1:
        raise invalid("filters", f"takes one filter at a time (as AWS), got {len(request.filters)}")
    name, value = "", ""
    if request.filters:
        pair = request.filters[0]
        if pair.name not in LIST_JOBS_FILTERS:
            raise invalid("filters[0].name", f"must be one of {', '.join(LIST_JOBS_FILTERS)}")
        if len(pair.values) != 1 or not pair.values[0]:
            raise invalid("filters[0].values", "needs exactly one non-empty value")
        name, value = pair.name, pair.values[0]
    share = None
    if name in ("QUOTA_SHARE_NAME", "SHARE_IDENTIFIER"):
        share = common.share(state, queue.name, "filters[0].values", value).name
    if request.quota_share_name:
        named = common.share(state, queue.name, "quota_share_name", request.quota_share_name).name
        if share is not None and share != named:
            raise invalid("quota_share_name", f"is {named!r} but the {name} filter is {share!r}")
        share = named
    status = job_status_name(request.job_status)
    if status is None and not request.all_statuses and not name and share is None:
        status = "RUNNING"
    if request.max_results and not 1 <= request.max_results <= MAX_LIST_JOBS:
        raise invalid("max_results", f"must be 1-{MAX_LIST_JOBS}, got {request.max_results}")
    return JobsQuery(
        job_queue=queue.name,
        quota_share=share,
        status=status,
        job_name=job_name_filter(value) if name == "JOB_NAME" else None,
        before_created_at=_millis(value, name == "BEFORE_CREATED_AT"),
        after_created_at=_millis(value, name == "AFTER_CREATED_AT"),
        max_results=request.max_results or MAX_LIST_JOBS,
        next_token=request.next_token or None,
    )


def job_name_filter(value: str) -> str:
    """A JOB_NAME filter value: AWS takes `*` only as the last character (a prefix match)."""
    if "*" in value[:-1]:
        raise invalid("filters[0].values", "JOB_NAME takes `*` only at the end (a prefix match)")
    return value


def list_pools(request: pb.ListWarmPoolsRequest, state: State) -> PoolsQuery:
    queue = None
    if request.job_queue:
        queue = common.queue(state, "job_queue", request.job_queue).name
    status = None
    if request.status:
        status = _POOL_STATUS.get(request.status)
        if status is None:
            raise invalid("status", f"unknown value {request.status}")
    return PoolsQuery(
        status=status,
        job_queue=queue,
        max_results=page_size(request.max_results),
        next_token=request.next_token or None,
    )


def list_nodes(request: pb.ListNodesRequest, state: State) -> NodesQuery:
    env = None
    if request.service_environment:
        env = common.environment(state, "service_environment", request.service_environment).name
    if request.state and request.state not in pb.NodeState.values():
        raise invalid("state", f"unknown value {request.state}")
    page_size(request.max_results)
    state_name = pb.NodeState.Name(request.state) if request.state else None
    return NodesQuery(service_environment=env, state=state_name)


def watch(request: pb.WatchServiceJobsRequest, state: State) -> WatchFilter:
    queue = None
    if request.job_queue:
        queue = common.queue(state, "job_queue", request.job_queue).name
    share = None
    if request.quota_share_name:
        if queue is None:
            raise invalid("quota_share_name", "needs job_queue")
        share = common.share(state, queue, "quota_share_name", request.quota_share_name).name
    for i, job_id in enumerate(request.job_ids):
        common.job(state, f"job_ids[{i}]", job_id)
    if request.after_sequence < 0:
        raise invalid("after_sequence", "must be >= 0")
    for i, status in enumerate(request.statuses):
        if status == pb.JOB_STATUS_UNSPECIFIED or status not in pb.JobStatus.values():
            raise invalid(f"statuses[{i}]", f"{status} is not a job status")
    return WatchFilter(
        job_queue=queue,
        quota_share=share,
        job_ids=frozenset(request.job_ids),
        statuses=frozenset(request.statuses),
    )


def names(field: str, refs: Sequence[str], kind: Kind) -> list[str] | None:
    """Names of a Describe request's name-or-ARN list; None = all."""
    if not refs:
        return None
    return [reference(f"{field}[{i}]", ref, kind) for i, ref in enumerate(refs)]


def _millis(value: str, given: bool) -> int | None:
    if not given:
        return None
    return decimal("filters[0].values", value, "a time in epoch milliseconds")
