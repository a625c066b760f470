"""Which subject may carry which event: each kind only from its producer's family."""

from __future__ import annotations

import pytest

from quartermaster import events as ev
from quartermaster.core.provenance import FAMILIES, Family, family_of, refusal
from quartermaster.eventlog import subjects

P = "qm"
REQUESTS = subjects.requests(P)
DECISIONS = subjects.decisions("q", P)
HOSTS = subjects.host_decisions(P)
TIMERS = subjects.timers(P)
H1 = subjects.reports("h1", P)
H2 = subjects.reports("h2", P)
ALL = (REQUESTS, DECISIONS, HOSTS, TIMERS, H1, H2)

dispatch = ev.JobDispatched(at=1, job_id="j", attempt=1, hosts=("h1",))
submitted = ev.JobSubmitted(
    at=1, job_id="j", job_name="j", job_queue="q", quota_share="s", instance_type="u"
)
registered_h1 = ev.HostRegistered(at=1, host_id="h1", instance_type="u")
running_h1 = ev.JobRunning(at=1, job_id="j", attempt=1, host="h1")
lost_h1 = ev.HostLost(at=1, host_id="h1")
tick = ev.ClockTicked(at=1)
drained = ev.HostDrained(at=1, host_id="h1")

# given an event, when it arrives on each subject, then only these subjects fold it
CASES = [
    (submitted, {REQUESTS}),
    (drained, {REQUESTS}),
    (dispatch, {DECISIONS, HOSTS}),  # a queue may be named `_hosts`
    (lost_h1, {HOSTS}),
    (tick, {TIMERS}),
    (registered_h1, {H1}),
    (running_h1, {H1}),
    (ev.HostHeartbeat(at=1, host_id="h1"), {H1}),
    (ev.JobStopConfirmed(at=1, job_id="j", attempt=1, host="h1"), {H1}),
]


@pytest.mark.parametrize(("event", "allowed"), CASES, ids=lambda c: getattr(c, "type", None))
def test_an_event_is_folded_only_from_its_family(event: ev.Event, allowed: set[str]) -> None:
    admitted = {subject for subject in ALL if refusal(event, subject, P) is None}
    assert admitted == allowed


def test_a_dispatch_on_a_request_or_report_subject_is_refused_with_the_reason() -> None:
    assert refusal(dispatch, REQUESTS, P) == (
        "job.dispatched belongs on decisions, host_decisions, not on qm.requests"
    )
    assert refusal(dispatch, H1, P) is not None


def test_a_report_of_host_y_on_host_xs_subject_is_refused() -> None:
    registered_h2 = ev.HostRegistered(at=1, host_id="h2", instance_type="u")
    assert refusal(registered_h2, H2, P) is None
    assert refusal(registered_h2, H1, P) == (
        "host.registered of host 'h2' on another host's subject qm.reports.h1"
    )
    failed_h2 = ev.JobFailed(at=1, job_id="j", attempt=1, host="h2", reason="boom")
    assert refusal(failed_h2, H1, P) is not None


def test_a_host_id_is_matched_by_its_subject_token() -> None:
    dotted = ev.HostHeartbeat(at=1, host_id="gpu.7")
    assert refusal(dotted, subjects.reports("gpu.7", P), P) is None


def test_subjects_outside_the_families_or_the_prefix_carry_nothing() -> None:
    for subject in (
        "qm.dlq.requests",
        "qm.requests.extra",
        "qm.reports",
        "qm.reports.h1.x",
        "qm.decisions",
        "other.requests",
        "qmx.requests",
    ):
        assert family_of(subject, P) is None, subject
        assert refusal(submitted, subject, P) is not None


def test_the_prefix_is_honoured() -> None:
    assert refusal(submitted, subjects.requests("t7"), "t7") is None
    assert refusal(submitted, REQUESTS, "t7") is not None
    assert family_of("t7.reports.h1", "t7") == (Family.REPORTS, "h1")


def test_every_event_kind_has_a_family() -> None:
    tags = {t.__struct_config__.tag for t in ev.EVENT_TYPES}
    assert tags == set(FAMILIES), "give each new event kind its subject family"
