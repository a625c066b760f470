"""Explain: the seed scenario's two preemptions, with their rule, beneficiary and ranking."""

from __future__ import annotations

from logs import seed_log

from quartermaster.audit.explain import Transition, explain
from quartermaster.audit.wire import from_proto, to_proto


def _preemption(steps: list[Transition], job_id: str) -> Transition:
    return next(t for t in steps if t.event == "job.preemption_requested" and t.decision)


def test_the_reclaim_of_med_for_qs2s_job() -> None:
    x = explain(seed_log(), "med")
    assert (x.status, x.share) == ("RUNNABLE", "QS1")
    steps = [(t.event, t.status_from, t.status_to) for t in x.transitions]
    assert steps == [
        ("job.submitted", "", "RUNNABLE"),
        ("job.dispatched", "RUNNABLE", "SCHEDULED"),
        ("job.starting", "SCHEDULED", "STARTING"),
        ("job.running", "STARTING", "RUNNING"),
        ("job.preemption_requested", "RUNNING", "RUNNING"),
        ("job.stop_confirmed", "RUNNING", "RUNNABLE"),
    ]
    dispatch = x.transitions[1].decision
    assert dispatch is not None and dispatch.rule == "BORROWED"  # QS1's second unit: QS2's idle one
    preempt = _preemption(x.transitions, "med")
    d = preempt.decision
    assert d is not None
    assert d.rule == "RECLAIM" and d.for_job == "qs2_job_1"
    assert d.inputs["lender_share"] == "QS2"
    assert (d.inputs["victim_in_use"], d.inputs["victim_limit"]) == ("2", "1")  # QS1 borrows 1
    # Why med rather than high: both borrow in QS1; the lower priority goes first.
    ranked = [(c.job_id, c.chosen) for c in d.candidates]
    assert ranked == [("med", True), ("high", False)]
    assert "priority 3 is above med's 2" in d.candidates[1].why
    usage = {u.share: (u.in_use, u.limit, u.borrowed) for u in preempt.usage}
    assert usage == {"QS1": (2, 1, 1), "QS2": (0, 1, 0), "QS3": (0, 1, 0)}
    # The stop that ends the attempt points back at the decision that asked for it.
    stop = x.transitions[-1]
    assert stop.decision == d and stop.decision_seq == preempt.seq


def test_the_in_share_preemption_of_high_for_low() -> None:
    x = explain(seed_log(), "high")
    preempt = _preemption(x.transitions, "high")
    d = preempt.decision
    assert d is not None
    assert d.rule == "IN_SHARE" and d.for_job == "low"
    assert (d.inputs["for_priority"], d.inputs["victim_priority"]) == ("4", "3")
    assert [(c.job_id, c.chosen) for c in d.candidates] == [("high", True)]
    # high ran again once low finished.
    assert x.status == "SCHEDULED"
    assert x.transitions[-1].event == "job.dispatched"


def test_the_beneficiary_sees_who_made_room_for_it() -> None:
    x = explain(seed_log(), "qs2_job_1")
    made_room = [t for t in x.transitions if t.event == "job.preemption_requested"]
    assert len(made_room) == 1
    assert made_room[0].summary == "med preempted to make room for this job"
    assert made_room[0].decision is not None and made_room[0].decision.rule == "RECLAIM"


def test_a_waiting_job_says_why_it_waits() -> None:
    x = explain(seed_log(), "med")
    assert x.waiting.startswith("WAITING:")


def test_the_explanation_survives_the_wire() -> None:
    x = explain(seed_log(), "med")
    back = from_proto(to_proto(x))
    assert [t.event for t in back.transitions] == [t.event for t in x.transitions]
    sent, got = x.transitions[4].decision, back.transitions[4].decision
    assert sent is not None and got is not None
    assert (got.rule, got.reason, got.inputs, got.for_job) == (
        sent.rule,
        sent.reason,
        sent.inputs,
        sent.for_job,
    )
    assert [(c.job_id, c.chosen, c.why) for c in got.candidates] == [
        (c.job_id, c.chosen, c.why) for c in sent.candidates
    ]
    assert abs(back.transitions[4].at - x.transitions[4].at) < 1e-3  # milliseconds on the wire
    assert back.waiting == x.waiting and back.status == x.status
