"""The fold builds a job positionally (fast): every field must land where it belongs."""

from __future__ import annotations

from quartermaster import events as ev
from quartermaster.core import State, fold
from quartermaster.core.model import Job
from quartermaster.core.warm_pools import match_key


def test_a_submitted_job_has_every_field_of_its_request() -> None:
    e = ev.JobSubmitted(
        at=3.0,
        job_id="j1",
        job_name="train",
        job_queue="q",
        quota_share="s",
        instance_type="ml.g5.xlarge",
        instance_count=2,
        scheduling_priority=4,
        retry_attempts=3,
        evaluate_on_exit=(ev.EvaluateOnExit(action="EXIT", on_status_reason="algo*"),),
        preemption_retries=1,
        attempt_duration_seconds=50,
        max_runtime_seconds=40,
        keep_alive_seconds=7,
        warm_pool_key=ev.WarmPoolKey(subnets=("b", "a"), instance_count=2),
        payload='{"x": 1}',
        tags={"team": "a"},
        client_token="tok",
        service_job_type="SAGEMAKER_TRAINING",
        principal="alice",
    )
    state = fold(State(), e)
    want = Job(
        job_id="j1",
        job_name="train",
        queue="q",
        share="s",
        unit="ml.g5.xlarge",
        count=2,
        priority=4,
        created_at=3.0,
        retry_attempts=3,
        evaluate_on_exit=e.evaluate_on_exit,
        preemption_retries=1,
        timeout_seconds=40,
        keep_alive_seconds=7,
        warm_pool_key=match_key(e.warm_pool_key),
        payload='{"x": 1}',
        tags={"team": "a"},
        client_token="tok",
        attempt_duration_seconds=50,
        service_job_type="SAGEMAKER_TRAINING",
        chain_id="j1",
        submitted_by="alice",
    )
    assert state.jobs["j1"] == want
    assert state.jobs["j1"].warm_pool_key.subnets == ("a", "b")
