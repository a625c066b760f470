"""`qm explain JOB_ID`: a job's history from the log, each step with the decision behind it.

For every event that touched the job: its position and time, who wrote it, the
status before and after, the decision that made the step (the event itself, or
the earlier decision whose effect it completes: the preemption a stop confirms),
the rule with its inputs, and the shares' usage at that moment. For a
preemption it also lists the jobs the rule ranked, in the core's victim order,
and why each was or was not taken.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from quartermaster import events as ev
from quartermaster.audit.envelope import Envelope, admit, decision_token
from quartermaster.audit.errors import PermanentAuditError
from quartermaster.audit.replay import ShareUsage, usage
from quartermaster.audit.rules import Candidate, RuleInfo, preemption_candidates, rule_of
from quartermaster.core import State, fold
from quartermaster.core.model import Job
from quartermaster.core.waiting import why_waiting


class DecisionInfo(msgspec.Struct, frozen=True):
    rule: str
    reason: str
    inputs: dict[str, str]
    for_job: str = ""
    candidates: list[Candidate] = []


class Transition(msgspec.Struct, frozen=True):
    seq: int
    at: float
    event: str  # the event's stable tag
    source: str  # request | decision | report | timer
    status_from: str  # "" before the job existed
    status_to: str
    status_reason: str
    summary: str
    decision: DecisionInfo | None = None
    decision_seq: int | None = None  # where `decision` was recorded, if not this event
    usage: list[ShareUsage] = []


class Explanation(msgspec.Struct, frozen=True):
    job_id: str
    job_name: str
    queue: str
    share: str
    status: str
    status_reason: str
    seq: int  # the log position the history runs to
    transitions: list[Transition]
    waiting: str = ""  # a RUNNABLE job: why it waits at that position (spec section 9)


def source_of(subject: str) -> str:
    if decision_token(subject) is not None:
        return "decision"
    family = subject.split(".")[-2] if subject.count(".") >= 2 else subject.split(".")[-1]
    return {"reports": "report", "timers": "timer", "requests": "request"}.get(family, "unknown")


def _touches(event: ev.Event, job_id: str) -> bool:
    return job_id in (
        getattr(event, "job_id", None),
        getattr(event, "for_job", None),
        getattr(event, "reused_by_job", None),
    )


class Explainer:
    """Folds the log and records the steps of one job; feed envelopes in order."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.state = State()
        self.seq = 0
        self.transitions: list[Transition] = []
        self._stop_decision: tuple[int, DecisionInfo] | None = None

    def feed(self, envelope: Envelope) -> None:
        events, _ = admit(envelope)  # what the services fold from this message
        if any(_touches(e, self.job_id) for e in events):
            self._explain(Envelope(envelope.seq, envelope.subject, events))
        else:
            for event in events:
                fold(self.state, event)
        self.seq = envelope.seq

    def feed_all(self, envelopes: Iterable[Envelope]) -> Explanation:
        for envelope in envelopes:
            self.feed(envelope)
        return self.result()

    def _explain(self, envelope: Envelope) -> None:
        source = source_of(envelope.subject)
        before = self.state  # the pass's view: nothing of this message folded yet
        ranked = {
            id(e): preemption_candidates(before, e, envelope.events)
            for e in envelope.events
            if isinstance(e, ev.JobPreemptionRequested) and _touches(e, self.job_id)
        }
        shares_then = self._usage()
        for event in envelope.events:
            if not _touches(event, self.job_id):
                fold(self.state, event)
                continue
            job = self.state.jobs.get(self.job_id)
            status_from = job.status.value if job is not None else ""
            rule = rule_of(self.state, event) if source == "decision" else None
            fold(self.state, event)
            job = self.state.jobs.get(self.job_id)
            if job is None:
                continue
            shares_then = shares_then or self._usage()  # a submission: the job exists now
            self._record(envelope, source, event, job, status_from, rule, ranked, shares_then)

    def _record(
        self,
        envelope: Envelope,
        source: str,
        event: ev.Event,
        job: Job,
        status_from: str,
        rule: RuleInfo | None,
        ranked: dict[int, list[Candidate]],
        shares_then: list[ShareUsage],
    ) -> None:
        status_to = job.status.value
        decision: DecisionInfo | None = None
        decision_seq: int | None = None
        if rule is not None:
            decision = DecisionInfo(
                rule.name,
                rule.reason,
                rule.inputs,
                getattr(event, "for_job", "") or "",
                ranked.get(id(event), []),
            )
            stops = isinstance(event, ev.JobPreemptionRequested | ev.JobTimedOut)
            if stops and getattr(event, "job_id", "") == self.job_id:
                self._stop_decision = (envelope.seq, decision)
        elif source == "report" and status_from != status_to and self._stop_decision:
            decision_seq, decision = self._stop_decision  # this report completes that stop
            self._stop_decision = None
        if source == "report" and status_from == status_to and decision is None:
            return  # another host of a multi-host attempt reporting the same step
        self.transitions.append(
            Transition(
                envelope.seq,
                event.at,
                ev.tag_of(event),
                source,
                status_from,
                status_to,
                job.status_reason,
                summarize(self.state, event, self.job_id, status_from, status_to),
                decision,
                decision_seq,
                shares_then,
            )
        )

    def _usage(self) -> list[ShareUsage]:
        job = self.state.jobs.get(self.job_id)
        return usage(self.state, job.queue, job.unit) if job is not None else []

    def result(self) -> Explanation:
        job = self.state.jobs.get(self.job_id)
        if job is None:
            raise PermanentAuditError(f"job {self.job_id!r} is not in the log")
        return Explanation(
            job.job_id,
            job.job_name,
            job.queue,
            job.share,
            job.status.value,
            job.status_reason,
            self.seq,
            self.transitions,
            reason.message if (reason := why_waiting(self.state, job.job_id)) else "",
        )


def explain(envelopes: Iterable[Envelope], job_id: str) -> Explanation:
    return Explainer(job_id).feed_all(envelopes)


def job_label(name: str, job_id: str) -> str:
    """How a step names another job: `name (id)`, or the id alone when they are equal."""
    return job_id if name in ("", job_id) else f"{name} ({job_id})"


def summarize(state: State, event: ev.Event, job_id: str, status_from: str, status_to: str) -> str:
    """One readable line for a step."""

    def label(other: str) -> str:
        job = state.jobs.get(other)
        return job_label(job.job_name if job is not None else "", other)

    moved = f"{status_from} -> {status_to}" if status_from and status_from != status_to else ""
    match event:
        case ev.JobSubmitted():
            return f"submitted to {event.job_queue}/{event.quota_share} -> {status_to}"
        case ev.JobDispatched():
            pool = f" on the warm pool of {label(event.warm_pool)}" if event.warm_pool else ""
            return f"dispatched, attempt {event.attempt}, on {', '.join(event.hosts)}{pool}"
        case ev.JobPreemptionRequested() if event.job_id == job_id:
            return f"preemption requested to make room for {label(event.for_job)}"
        case ev.JobPreemptionRequested():
            return f"{label(event.job_id)} preempted to make room for this job"
        case ev.WarmPoolReused() if event.job_id != job_id:
            return f"took the warm pool of {label(event.job_id)}"
        case ev.WarmPoolReused():
            return f"its warm pool was taken by {label(event.reused_by_job)}"
    tag = ev.tag_of(event).split(".", 1)[-1].replace("_", " ")
    return f"{tag} ({moved})" if moved else tag
