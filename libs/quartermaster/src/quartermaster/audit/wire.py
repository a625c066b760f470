"""An explanation as the ExplainServiceJob message, and back (the edge: protobuf stays here).

Needs protobuf (the `client` or `grpc` extra). Times travel as epoch
milliseconds, as everywhere in qm.v1.
"""

from __future__ import annotations

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.audit.explain import DecisionInfo, Explanation, Transition
from quartermaster.audit.replay import ShareUsage
from quartermaster.audit.rules import Candidate


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _status(name: str) -> int:
    return pb.JobStatus.Value(f"JOB_STATUS_{name}") if name else pb.JOB_STATUS_UNSPECIFIED


def _status_name(value: int) -> str:
    return (
        ""
        if value == pb.JOB_STATUS_UNSPECIFIED
        else pb.JobStatus.Name(value).removeprefix("JOB_STATUS_")
    )


def to_proto(x: Explanation) -> pb.ExplainServiceJobResponse:
    return pb.ExplainServiceJobResponse(
        job_id=x.job_id,
        job_name=x.job_name,
        job_queue=x.queue,
        quota_share_name=x.share,
        status=_status(x.status),  # type: ignore[arg-type]
        status_reason=x.status_reason,
        sequence=x.seq,
        transitions=[_transition(t) for t in x.transitions],
        waiting_reason=x.waiting,
    )


def _transition(t: Transition) -> pb.ExplainedTransition:
    out = pb.ExplainedTransition(
        sequence=t.seq,
        at=_ms(t.at),
        event_type=t.event,
        source=t.source,
        from_status=_status(t.status_from),  # type: ignore[arg-type]
        to_status=_status(t.status_to),  # type: ignore[arg-type]
        status_reason=t.status_reason,
        summary=t.summary,
        decision_sequence=t.decision_seq or 0,
        share_usage=[_usage(u) for u in t.usage],
    )
    if t.decision is not None:
        d = t.decision
        out.decision.CopyFrom(
            pb.ExplainedDecision(
                rule=d.rule,
                reason=d.reason,
                inputs=d.inputs,
                for_job_id=d.for_job,
                candidates=[
                    pb.ExplainedCandidate(
                        job_id=c.job_id,
                        job_name=c.job_name,
                        quota_share_name=c.share,
                        scheduling_priority=c.priority,
                        dispatched_at=_ms(c.dispatched_at),
                        chosen=c.chosen,
                        why=c.why,
                        seconds_at_risk=c.seconds_at_risk,
                    )
                    for c in d.candidates
                ],
            )
        )
    return out


def _usage(u: ShareUsage) -> pb.ExplainedShareUsage:
    return pb.ExplainedShareUsage(
        quota_share_name=u.share,
        strategy=pb.SharingStrategy.Value(f"SHARING_STRATEGY_{u.strategy}"),
        usage=pb.ShareCapacityUsage(
            capacity_unit=u.unit, quantity=u.in_use, max_capacity=u.limit, borrowed=u.borrowed
        ),
        stopping=u.stopping,
    )


def from_proto(r: pb.ExplainServiceJobResponse) -> Explanation:
    return Explanation(
        r.job_id,
        r.job_name,
        r.job_queue,
        r.quota_share_name,
        _status_name(r.status),
        r.status_reason,
        r.sequence,
        [_from_transition(t, r.job_queue) for t in r.transitions],
        r.waiting_reason,
    )


def _from_transition(t: pb.ExplainedTransition, queue: str) -> Transition:
    decision = None
    if t.HasField("decision"):
        d = t.decision
        decision = DecisionInfo(
            d.rule,
            d.reason,
            dict(d.inputs),
            d.for_job_id,
            [
                Candidate(
                    c.job_id,
                    c.job_name,
                    c.quota_share_name,
                    c.scheduling_priority,
                    c.dispatched_at / 1000,
                    c.chosen,
                    c.why,
                    c.seconds_at_risk if c.HasField("seconds_at_risk") else None,
                )
                for c in d.candidates
            ],
        )
    return Transition(
        t.sequence,
        t.at / 1000,
        t.event_type,
        t.source,
        _status_name(t.from_status),
        _status_name(t.to_status),
        t.status_reason,
        t.summary,
        decision,
        t.decision_sequence or None,
        [
            ShareUsage(
                queue,
                u.quota_share_name,
                u.usage.capacity_unit,
                pb.SharingStrategy.Name(u.strategy).removeprefix("SHARING_STRATEGY_"),
                u.usage.quantity,
                u.usage.max_capacity,
                u.usage.borrowed,
                u.stopping,
            )
            for u in t.share_usage
        ],
    )
