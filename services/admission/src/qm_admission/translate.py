"""Translation at the edge: read-model documents and folded entities into API messages.

Entities become messages through the read model's own documents (`store.documents`),
so an answer built from the folded state looks exactly like one read from Postgres.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from google.protobuf import json_format
from google.protobuf.message import Message

from qm_admission.names import Kind, arn
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import DryRun, Host, Job, State
from quartermaster.store import documents

M = TypeVar("M", bound=Message)


def parse(doc: dict[str, Any], message: M) -> M:
    """Fill `message` from a read-model document keyed by proto field names."""
    json_format.ParseDict(doc, message, ignore_unknown_fields=True)
    return message


def job_status_name(value: int) -> str | None:
    """A JobStatus enum number as the domain's status name; None for UNSPECIFIED."""
    if value == pb.JOB_STATUS_UNSPECIFIED:
        return None
    return str(pb.JobStatus.Name(value)).removeprefix("JOB_STATUS_")


def job_reply(job_id: str, job_name: str) -> pb.SubmitServiceJobResponse:
    return pb.SubmitServiceJobResponse(
        job_id=job_id, job_name=job_name, job_arn=arn(Kind.JOB, job_id)
    )


def dry_run_result(
    result: DryRun, hide: Callable[[tuple[str, ...]], tuple[str, ...]]
) -> pb.DryRunResult:
    """What the pass would do with the job; `hide` blanks ids the caller may not see."""
    message = pb.DryRunResult(
        would_start=result.starts,
        host_ids=list(result.hosts),
        warm_pool_job_id=hide((result.warm_pool,))[0] if result.warm_pool else "",
        rule=result.rule.value if result.rule is not None else "",
        preempted_job_ids=list(hide(result.preempts)),
        terminated_warm_pool_job_ids=list(hide(result.evicts)),
    )
    if result.wait is not None:
        reason = msgspec.structs.replace(result.wait, job_ids=hide(result.wait.job_ids))
        message.wait_reason.CopyFrom(parse(documents.wait_reason_doc(reason), pb.WaitReason()))
    return message


def job_state_change(job: Job, seq: int, at: float) -> pb.JobStateChange:
    return pb.JobStateChange(
        job_id=job.job_id,
        job_name=job.job_name,
        job_queue=job.queue,
        quota_share_name=job.share,
        status=f"JOB_STATUS_{job.status.value}",
        status_reason=job.status_reason,
        sequence=seq,
        at=documents.epoch_ms(at),
    )


def warm_pool_summary(state: State, job_id: str) -> pb.WarmPoolSummary:
    """The pool a job left (or, while it runs, will leave) as the folded state has it now."""
    pool = state.pools.get(job_id)
    if pool is not None:
        return parse(documents.pool_doc(state, pool), pb.WarmPoolSummary())
    job = state.jobs[job_id]
    return pb.WarmPoolSummary(
        training_job_name=job.job_name,
        job_id=job.job_id,
        job_queue=job.queue,
        quota_share_name=job.share,
        instance_type=job.unit,
        instance_count=job.count,
    )


def node_summary(state: State, host: Host) -> pb.NodeSummary:
    return parse(documents.host_doc(state, host), pb.NodeSummary())
