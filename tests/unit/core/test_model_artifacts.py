"""Each attempt is a training job: the model it uploaded lands on that attempt.

The host that uploads (algo-1) names the model in the report that ends its part of
the attempt (JobSucceeded, JobFailed or JobStopConfirmed); its peers name none. A
report for another attempt changes nothing.
"""

from __future__ import annotations

import json

import pytest

from quartermaster import events as ev
from quartermaster.core.model import JobStatus
from quartermaster.core.snapshot import restore, take
from quartermaster.testing.builders import World, a_job

MODEL = "s3://models/out/train-{}-1/output/model.tar.gz"


def running(hosts: int = 1, attempts: int = 1) -> tuple[World, str]:
    """A job on `hosts` hosts, RUNNING in its first attempt."""
    w = World().environment(ml_g5_xlarge=hosts).queue().hosts(hosts)
    w.share("QS1", hosts, "RESERVE")
    job_id = w.submit(a_job(name="train", count=hosts, attempts=attempts))
    w.pass_()
    w.start(job_id)
    assert w.status(job_id) is JobStatus.RUNNING
    return w, job_id


def test_a_success_with_a_model_keeps_it_on_the_attempt() -> None:
    w, job_id = running()
    job = w.job(job_id)

    w.apply(
        ev.JobSucceeded(
            at=w.clock,
            job_id=job_id,
            attempt=job.attempt_no,
            host=job.hosts[0],
            model_artifacts=MODEL.format(job_id[:8]),
        )
    )

    assert w.status(job_id) is JobStatus.SUCCEEDED
    assert [a.model_artifacts for a in w.job(job_id).attempts] == [MODEL.format(job_id[:8])]


def test_the_uploading_host_names_the_model_and_its_peers_do_not_erase_it() -> None:
    w, job_id = running(hosts=2)
    job = w.job(job_id)
    first, second = job.hosts

    w.apply(
        ev.JobSucceeded(
            at=w.clock,
            job_id=job_id,
            attempt=job.attempt_no,
            host=first,
            model_artifacts="s3://models/m.tar.gz",
        )
    )
    w.apply(ev.JobSucceeded(at=w.clock, job_id=job_id, attempt=job.attempt_no, host=second))

    assert w.status(job_id) is JobStatus.SUCCEEDED
    assert w.job(job_id).attempts[-1].model_artifacts == "s3://models/m.tar.gz"


def test_a_failed_attempt_keeps_the_model_it_uploaded_and_a_retry_starts_without_one() -> None:
    w, job_id = running(attempts=2)
    job = w.job(job_id)

    w.apply(
        ev.JobFailed(
            at=w.clock,
            job_id=job_id,
            attempt=job.attempt_no,
            host=job.hosts[0],
            reason="AlgorithmError: exit 1",
            exit_code=1,
            model_artifacts="s3://models/1.tar.gz",
        )
    )
    w.pass_()  # retried and dispatched again

    attempts = w.job(job_id).attempts
    assert [(a.number, a.model_artifacts) for a in attempts] == [
        (1, "s3://models/1.tar.gz"),
        (2, ""),
    ]


def test_a_stopped_attempt_keeps_the_model_its_stop_report_names() -> None:
    w, job_id = running()
    job = w.job(job_id)
    w.apply(ev.JobTerminationRequested(at=w.clock, job_id=job_id, reason="enough"))

    w.apply(
        ev.JobStopConfirmed(
            at=w.clock,
            job_id=job_id,
            attempt=job.attempt_no,
            host=job.hosts[0],
            exit_code=143,
            model_artifacts="s3://models/stopped.tar.gz",
        )
    )

    assert w.status(job_id) is JobStatus.FAILED
    assert w.job(job_id).attempts[-1].model_artifacts == "s3://models/stopped.tar.gz"


@pytest.mark.parametrize("kind", [ev.JobSucceeded, ev.JobStopConfirmed])
def test_a_report_for_another_attempt_names_no_model(kind: type[ev.Event]) -> None:
    w, job_id = running()
    job = w.job(job_id)

    w.apply(
        kind(  # type: ignore[call-arg]
            at=w.clock,
            job_id=job_id,
            attempt=job.attempt_no + 1,
            host=job.hosts[0],
            model_artifacts="s3://models/stale.tar.gz",
        )
    )

    assert w.job(job_id).attempts[-1].model_artifacts == ""
    assert w.status(job_id) is JobStatus.RUNNING


def test_a_snapshot_keeps_the_model() -> None:
    w, job_id = running()
    job = w.job(job_id)
    w.apply(
        ev.JobSucceeded(
            at=w.clock,
            job_id=job_id,
            attempt=job.attempt_no,
            host=job.hosts[0],
            model_artifacts="s3://models/m.tar.gz",
        )
    )

    state, _ = restore(take(w.state, seq=7))

    assert state.jobs[job_id].attempts[-1].model_artifacts == "s3://models/m.tar.gz"


@pytest.mark.parametrize("tag", ["job.succeeded", "job.failed", "job.stop_confirmed"])
def test_reports_recorded_before_the_field_decode_without_a_model(tag: str) -> None:
    old = {"type": tag, "at": 1.0, "job_id": "j", "attempt": 1, "host": "h", "reason": "r"}
    if tag != "job.failed":
        del old["reason"]

    event = ev.from_json(json.dumps(old))

    assert isinstance(event, ev.JobSucceeded | ev.JobFailed | ev.JobStopConfirmed)
    assert event.model_artifacts == ""
