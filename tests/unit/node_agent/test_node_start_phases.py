"""An attempt's start phases: reported on JobRunning, folded, shown by DescribeServiceJob."""

from __future__ import annotations

import msgspec
from google.protobuf import json_format

from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.store import documents
from quartermaster.testing.builders import World, a_job

PHASES = ev.StartPhases(pull_s=4.5, volume_s=0.07, staging_s=0.3, container_s=0.6, warm=False)


def running_with(phases: ev.StartPhases | None) -> World:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.submit(a_job(), "j")
    w.pass_()
    job = w.job("j")
    w.apply(ev.JobStarting(at=w.clock, job_id="j", attempt=job.attempt_no, host=job.hosts[0]))
    w.apply(
        ev.JobRunning(
            at=w.clock, job_id="j", attempt=job.attempt_no, host=job.hosts[0], start_phases=phases
        )
    )
    return w


def test_the_phases_of_the_running_report_are_folded_onto_the_attempt() -> None:
    assert running_with(PHASES).job("j").attempts[-1].start_phases == PHASES


def test_describe_service_job_shows_each_phase_of_the_latest_attempt() -> None:
    w = running_with(PHASES)
    doc = documents.job_doc(w.state, w.job("j"))
    detail = json_format.ParseDict(doc, pb.ServiceJobDetail(), ignore_unknown_fields=True)

    for attempt in (detail.attempts[-1], detail.latest_attempt):
        assert attempt.HasField("start_phases")
        shown = attempt.start_phases
        assert (shown.pull_seconds, shown.volume_seconds) == (4.5, 0.07)
        assert (shown.staging_seconds, shown.container_seconds, shown.warm) == (0.3, 0.6, False)


def test_a_report_without_phases_shows_none() -> None:
    w = running_with(None)
    detail = json_format.ParseDict(
        documents.job_doc(w.state, w.job("j")), pb.ServiceJobDetail(), ignore_unknown_fields=True
    )
    assert not detail.attempts[-1].HasField("start_phases")


def test_a_running_report_recorded_before_phases_existed_still_decodes() -> None:
    old = b'{"type":"job.running","at":1.0,"job_id":"j","attempt":1,"host":"h1"}'
    event = msgspec.json.decode(old, type=ev.AnyEvent)
    assert isinstance(event, ev.JobRunning) and event.start_phases is None
