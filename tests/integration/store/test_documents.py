"""Documents parse into their qm.v1 messages field for field (no unknown key allowed)."""

from __future__ import annotations

from typing import Any, TypeVar

import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State
from quartermaster.store import arns
from quartermaster.store import documents as docs
from quartermaster.testing.builders import World, a_job

from .histories import seed_history

M = TypeVar("M", bound=Message)


def strict(doc: dict[str, Any], message: M) -> M:
    """ParseDict that fails on any key the message does not have."""
    json_format.ParseDict(doc, message, ignore_unknown_fields=False)
    return message


@pytest.fixture(scope="module")
def state() -> State:
    return seed_history().w.state


def test_every_job_parses_as_detail_and_summary(state: State) -> None:
    for job in state.jobs.values():
        detail = docs.job_doc(state, job)
        message = strict(detail, pb.ServiceJobDetail())
        assert isinstance(message, pb.ServiceJobDetail)
        assert pb.JobStatus.Name(message.status) == f"JOB_STATUS_{job.status.value}"
        assert message.job_arn == arns.job(job.job_id)
        strict(docs.job_summary(detail), pb.ServiceJobSummary())


def test_a_preempted_job_shows_its_attempt_and_the_preemption(state: State) -> None:
    med = strict(docs.job_doc(state, state.jobs["med"]), pb.ServiceJobDetail())
    assert med.status == pb.JOB_STATUS_RUNNABLE
    assert med.status_reason.startswith("Preempted: capacity reclaimed")
    assert med.preemption_summary.preempted_attempt_count == 1
    assert list(med.preemption_summary.recent_preempted_attempts) == list(med.attempts)
    assert list(med.attempts[0].host_ids) == ["h2"]
    assert not med.attempts[0].HasField("exit_code")
    assert not med.HasField("warm_pool_status")
    assert list(med.capacity_usage) == []


def test_a_running_job_holds_its_units_and_a_retried_job_lists_both_attempts(
    state: State,
) -> None:
    low = strict(docs.job_doc(state, state.jobs["low"]), pb.ServiceJobDetail())
    assert low.status == pb.JOB_STATUS_RUNNING
    assert [(u.capacity_unit, u.quantity) for u in low.capacity_usage] == [("ml.g5.xlarge", 1)]
    assert low.started_at == docs.epoch_ms(state.jobs["low"].attempts[-1].started_at) > 0
    flaky = strict(docs.job_doc(state, state.jobs["flaky"]), pb.ServiceJobDetail())
    assert flaky.status == pb.JOB_STATUS_SUCCEEDED
    assert [(a.status_reason, a.exit_code) for a in flaky.attempts] == [
        ("AlgorithmError: boom", 3),
        ("Essential container in task exited", 0),
    ]
    assert flaky.retry_strategy.attempts == 2
    assert flaky.stopped_at > 0


def test_each_attempt_is_a_training_job_named_by_its_number(state: State) -> None:
    job = state.jobs["flaky"]
    flaky = strict(docs.job_doc(state, job), pb.ServiceJobDetail())
    names = [f"flaky-{job.job_id[:8]}-1", f"flaky-{job.job_id[:8]}-2"]
    assert [a.training_job_name for a in flaky.attempts] == names
    assert [a.training_job_arn for a in flaky.attempts] == [
        f"arn:aws:sagemaker:us-east-1:000000000000:training-job/{name}" for name in names
    ]
    assert flaky.latest_attempt.training_job_name == names[1]
    assert [a.model_artifacts for a in flaky.attempts] == ["", ""]  # none uploaded
    med = strict(docs.job_doc(state, state.jobs["med"]), pb.ServiceJobDetail())
    (preempted,) = med.preemption_summary.recent_preempted_attempts
    assert preempted.training_job_name == med.attempts[0].training_job_name


def test_an_attempt_shows_the_model_it_uploaded() -> None:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE")
    job_id = w.submit(a_job(name="train"))
    w.pass_()
    w.start(job_id)
    host = w.job(job_id).hosts[0]
    model = f"s3://models/out/train-{job_id[:8]}-1/output/model.tar.gz"
    w.apply(ev.JobSucceeded(at=w.clock, job_id=job_id, attempt=1, host=host, model_artifacts=model))

    detail = strict(docs.job_doc(w.state, w.job(job_id)), pb.ServiceJobDetail())

    assert detail.latest_attempt.model_artifacts == model
    assert detail.latest_attempt.training_job_name == f"train-{job_id[:8]}-1"


def test_a_terminated_job_is_failed_and_marked_terminated(state: State) -> None:
    doomed = strict(docs.job_doc(state, state.jobs["doomed"]), pb.ServiceJobDetail())
    assert (doomed.status, doomed.status_reason, doomed.is_terminated) == (
        pb.JOB_STATUS_FAILED,
        "no longer needed",
        True,
    )


def test_warm_pools_parse_as_summaries_and_in_the_jobs_status(state: State) -> None:
    for pool in state.pools.values():
        strict(docs.pool_doc(state, pool), pb.WarmPoolSummary())
    warm1 = strict(docs.job_doc(state, state.jobs["warm1"]), pb.ServiceJobDetail())
    assert warm1.warm_pool_status.status == pb.WARM_POOL_STATUS_REUSED
    assert warm1.warm_pool_status.reused_by_job == "warm2"
    assert warm1.warm_pool_status.resource_retained_billable_time_in_seconds == 30


def test_hosts_parse_as_node_summaries(state: State) -> None:
    nodes = {
        h.host_id: strict(docs.host_doc(state, h), pb.NodeSummary()) for h in state.hosts.values()
    }
    assert nodes["h1"].job_id == "low"
    assert nodes["h2"].state == pb.NODE_STATE_LOST
    assert nodes["h3"].job_id == ""


def test_configuration_parses_as_its_messages(state: State) -> None:
    for share in state.shares.values():
        strict(docs.share_doc(share, created_at=1000.0), pb.QuotaShareDetail())
        strict(
            {
                "quota_share": docs.share_doc(share),
                "oversubscribed": docs.oversubscribed(state, share),
                "capacity_usage": docs.share_usage(state, share),
            },
            pb.DescribeQuotaShareResponse(),
        )
    for environment in state.environments.values():
        strict(docs.environment_doc(state, environment), pb.ServiceEnvironmentDetail())
    for queue in state.queues.values():
        strict(docs.queue_doc(queue), pb.JobQueueDetail())
    qs1 = strict(docs.share_doc(state.shares[("q", "QS1")]), pb.QuotaShareDetail())
    assert qs1.resource_sharing_configuration.strategy == pb.SHARING_STRATEGY_LEND_AND_BORROW
    assert qs1.resource_sharing_configuration.borrow_limit == 200
    assert qs1.preemption_configuration.in_share_preemption == pb.IN_SHARE_PREEMPTION_ENABLED
    qs3 = strict(docs.share_doc(state.shares[("q", "QS3")]), pb.QuotaShareDetail())
    assert not qs3.resource_sharing_configuration.HasField("borrow_limit")


def test_a_submission_s_options_are_reported_as_given() -> None:
    r = seed_history()
    r.w.apply(
        ev.JobSubmitted(
            at=r.w.clock,
            job_id="opts",
            job_name="opts",
            job_queue="q",
            quota_share="QS2",
            instance_type="ml.g5.xlarge",
            retry_attempts=3,
            evaluate_on_exit=(ev.EvaluateOnExit("EXIT", on_exit_code="137"),),
            preemption_retries=0,
            attempt_duration_seconds=600,
            payload='{"RoleArn": "r"}',
            tags={"team": "vision"},
        )
    )
    job = strict(docs.job_doc(r.w.state, r.w.state.jobs["opts"]), pb.ServiceJobDetail())
    assert job.retry_strategy.evaluate_on_exit[0].action == pb.RETRY_ACTION_EXIT
    assert job.retry_strategy.evaluate_on_exit[0].on_exit_code == "137"
    assert job.preemption_configuration.HasField("preemption_retries_before_termination")
    assert job.preemption_configuration.preemption_retries_before_termination == 0
    assert job.timeout_config.attempt_duration_seconds == 600
    assert dict(job.tags) == {"team": "vision"}
    assert job.service_request_payload == '{"RoleArn": "r"}'
    assert job.created_at == round(r.w.clock * 1000)


def test_an_unset_preemption_limit_stays_unset() -> None:
    r = seed_history()
    r.submit(a_job(name="plain").in_share("QS2"))
    job = strict(docs.job_doc(r.w.state, r.w.state.jobs["plain"]), pb.ServiceJobDetail())
    assert not job.preemption_configuration.HasField("preemption_retries_before_termination")
