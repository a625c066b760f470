"""AWS Batch fidelity, pure: list queries, ARNs, deletes, tags, and their fold (issue 9).

A request and a folded state in, a query or events (or a rejection naming the
field) out; the events folded back give the state AWS describes. No servers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from qm_admission import queries, references, validation
from qm_admission.errors import Code, RequestRejected
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.core import State
from quartermaster.core.fork import fork
from quartermaster.core.snapshot import restore, take
from quartermaster.store import arns
from quartermaster.store import documents as docs
from quartermaster.testing.builders import World, a_job

NOW = 5_000.0


def world() -> World:
    """env (1 host) -> q with shares A (ENABLED) and B (DISABLED); `running` runs in B,
    `queued` waits in A."""
    w = World()
    w.environment("env", ml_g5_xlarge=1)
    w.queue("q", "env")
    w.share("A", 1)
    w.share("B", 1)
    w.hosts(1)
    w.submit(a_job(name="running").in_share("B"), job_id="running")
    w.pass_()  # folds its decisions: `running` takes the host
    w.submit(a_job(name="queued").in_share("A"), job_id="queued")
    w.start("running")
    w.share("B", 1, updated=True)
    w.apply(
        ev.QuotaShareUpdated(
            at=w.clock,
            job_queue="q",
            name="B",
            capacity_limits=(ev.CapacityLimit("ml.g5.xlarge", 1),),
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
            state=ev.State.DISABLED,
        )
    )
    return w


def rejected(call: Any) -> tuple[Code, str]:
    with pytest.raises(RequestRejected) as raised:
        call()
    return raised.value.code, raised.value.field


def one_filter(name: str, value: str, **fields: Any) -> pb.ListServiceJobsRequest:
    return pb.ListServiceJobsRequest(
        job_queue="q", filters=[pb.KeyValuesPair(name=name, values=[value])], **fields
    )


# ---- ListServiceJobs ------------------------------------------------------------------------


def test_no_status_and_no_filter_lists_running_jobs() -> None:
    state = world().state
    assert queries.list_jobs(pb.ListServiceJobsRequest(job_queue="q"), state).status == "RUNNING"
    every = pb.ListServiceJobsRequest(job_queue="q", all_statuses=True)
    assert queries.list_jobs(every, state).status is None
    assert queries.list_jobs(one_filter("JOB_NAME", "x"), state).status is None
    by_share = pb.ListServiceJobsRequest(job_queue="q", quota_share_name="A")
    assert queries.list_jobs(by_share, state).status is None


@pytest.mark.parametrize("name", ["QUOTA_SHARE_NAME", "SHARE_IDENTIFIER"])
def test_share_filters_name_the_quota_share(name: str) -> None:
    query = queries.list_jobs(one_filter(name, "B"), world().state)
    assert (query.quota_share, query.status) == ("B", None)


def test_a_trailing_star_is_kept_for_a_prefix_match() -> None:
    query = queries.list_jobs(one_filter("JOB_NAME", "Train*"), world().state)
    assert query.job_name == "Train*"


@pytest.mark.parametrize(
    ("request_", "code", "field"),
    [
        (
            pb.ListServiceJobsRequest(job_queue="q", max_results=101),
            Code.INVALID_ARGUMENT,
            "max_results",
        ),
        (
            pb.ListServiceJobsRequest(job_queue="q", max_results=-1),
            Code.INVALID_ARGUMENT,
            "max_results",
        ),
        (one_filter("JOB_NAME", "*x"), Code.INVALID_ARGUMENT, "filters[0].values"),
        (one_filter("JOB_NAME", "a*b*"), Code.INVALID_ARGUMENT, "filters[0].values"),
        (one_filter("NAME", "x"), Code.INVALID_ARGUMENT, "filters[0].name"),
        (one_filter("QUOTA_SHARE_NAME", "C"), Code.NOT_FOUND, "filters[0].values"),
        (one_filter("BEFORE_CREATED_AT", "soon"), Code.INVALID_ARGUMENT, "filters[0].values"),
        (
            one_filter("SHARE_IDENTIFIER", "A", quota_share_name="B"),
            Code.INVALID_ARGUMENT,
            "quota_share_name",
        ),
        (
            pb.ListServiceJobsRequest(
                job_queue="q",
                filters=[
                    pb.KeyValuesPair(name="JOB_NAME", values=["a"]),
                    pb.KeyValuesPair(name="AFTER_CREATED_AT", values=["1"]),
                ],
            ),
            Code.INVALID_ARGUMENT,
            "filters",
        ),
    ],
)
def test_bad_list_queries_are_refused_naming_the_field(
    request_: pb.ListServiceJobsRequest, code: Code, field: str
) -> None:
    assert rejected(lambda: queries.list_jobs(request_, world().state)) == (code, field)


def test_max_results_1_to_100_is_taken_and_0_means_100() -> None:
    state = world().state
    for given, used in ((1, 1), (100, 100), (0, 100)):
        request = pb.ListServiceJobsRequest(job_queue="q", max_results=given)
        assert queries.list_jobs(request, state).max_results == used


# ---- ARNs -----------------------------------------------------------------------------------


def test_arns_are_resolved_in_place() -> None:
    update = pb.UpdateServiceJobRequest(job_id=arns.job("abc"))
    watch = pb.WatchServiceJobsRequest(job_ids=["x", arns.job("y")])
    share = pb.DeleteQuotaShareRequest(quota_share_arn=arns.quota_share("q", "A"))

    for request in (update, watch, share):
        references.resolve(request)

    assert update.job_id == "abc"
    assert list(watch.job_ids) == ["x", "y"]
    assert (share.job_queue, share.quota_share_name) == ("q", "A")


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (pb.DescribeServiceJobRequest(job_id="arn:qm:batch:r:1:job-queue/q"), "job_id"),
        (pb.DescribeServiceJobRequest(job_id="arn:broken"), "job_id"),
        (pb.WatchServiceJobsRequest(job_ids=["arn:qm:batch:r:1:job/a/b"]), "job_ids[0]"),
        (pb.DescribeQuotaShareRequest(quota_share_arn=arns.job_queue("q")), "quota_share_arn"),
        (
            pb.DescribeQuotaShareRequest(quota_share_arn=arns.quota_share("q", "A"), job_queue="p"),
            "job_queue",
        ),
        (
            pb.UpdateQuotaShareRequest(
                quota_share_arn=arns.quota_share("q", "A"), quota_share_name="B"
            ),
            "quota_share_name",
        ),
    ],
)
def test_a_bad_arn_is_invalid_on_its_field(request_: Any, field: str) -> None:
    assert rejected(lambda: references.resolve(request_)) == (Code.INVALID_ARGUMENT, field)


# ---- deletes --------------------------------------------------------------------------------


def test_deleting_a_disabled_share_terminates_its_unfinished_jobs_first() -> None:
    w = world()
    events = validation.delete_quota_share(
        pb.DeleteQuotaShareRequest(job_queue="q", quota_share_name="B"), w.state, at=NOW
    )

    assert events == [
        ev.JobTerminationRequested(at=NOW, job_id="running", reason="Quota share B deleted"),
        ev.QuotaShareDeleted(at=NOW, job_queue="q", name="B"),
    ]
    for event in events:
        w.apply(event)
    assert ("q", "B") not in w.state.shares
    assert w.state.jobs["running"].is_terminated
    w.confirm_stop("running")  # the stop of a job whose share is gone still settles
    assert w.state.env_use[("env", "ml.g5.xlarge")] == 0


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (
            lambda s: validation.delete_quota_share(
                pb.DeleteQuotaShareRequest(job_queue="q", quota_share_name="A"), s, at=NOW
            ),
            "quota_share_name",
        ),
        (
            lambda s: validation.delete_job_queue(
                pb.DeleteJobQueueRequest(job_queue="q"), s, at=NOW
            ),
            "job_queue",
        ),
        (
            lambda s: validation.delete_service_environment(
                pb.DeleteServiceEnvironmentRequest(service_environment="env"), s, at=NOW
            ),
            "service_environment",
        ),
        (
            lambda s: validation.delete_scheduling_policy(
                pb.DeleteSchedulingPolicyRequest(arn=arns.scheduling_policy("fifo")), s, at=NOW
            ),
            "arn",
        ),
    ],
)
def test_a_resource_in_use_or_enabled_is_not_deleted(call: Any, field: str) -> None:
    assert rejected(lambda: call(world().state)) == (Code.FAILED_PRECONDITION, field)


def test_deletes_fold_away_and_survive_a_snapshot() -> None:
    w = World()
    w.environment("env", ml_g5_xlarge=1)
    w.queue("q", "env")
    w.apply(ev.SchedulingPolicyCreated(at=w.clock, name="spare", tags={"t": "1"}))
    w.apply(ev.JobQueueDeleted(at=w.clock, name="q"))
    w.apply(ev.SchedulingPolicyDeleted(at=w.clock, name="fifo"))
    w.apply(ev.ServiceEnvironmentDeleted(at=w.clock, name="env"))

    restored, _ = restore(take(w.state, 7))

    for state in (w.state, restored, fork(w.state)):
        assert (state.queues, state.environments) == ({}, {})
        assert (state.policies, state.policy_tags) == ({"spare": "FIFO"}, {"spare": {"t": "1"}})


# ---- tags -----------------------------------------------------------------------------------


def tag(state: State, arn: str, **tags: str) -> list[ev.Event]:
    return validation.tag_resource(
        pb.TagResourceRequest(resource_arn=arn, tags=tags), state, at=NOW
    )


def test_tags_of_every_kind_fold_and_show_in_documents() -> None:
    w = world()
    targets: dict[str, Callable[[State], dict[str, Any]]] = {
        arns.service_environment("env"): lambda s: docs.environment_doc(s, s.environments["env"]),
        arns.scheduling_policy("fifo"): lambda s: docs.policy_doc(
            "fifo", "FIFO", tags=s.policy_tags.get("fifo")
        ),
        arns.job_queue("q"): lambda s: docs.queue_doc(s.queues["q"]),
        arns.quota_share("q", "A"): lambda s: docs.share_doc(s.shares[("q", "A")]),
        arns.job("queued"): lambda s: docs.job_doc(s, s.jobs["queued"]),
    }
    for arn in targets:
        for event in tag(w.state, arn, team="a", cost="1"):
            w.apply(event)
        for event in validation.untag_resource(
            pb.UntagResourceRequest(resource_arn=arn, tag_keys=["cost", "absent"]), w.state, at=NOW
        ):
            w.apply(event)

    for arn, doc in targets.items():
        assert doc(w.state)["tags"] == {"team": "a"}, arn
    w.share("A", 2, updated=True)  # an update carries no tags: they stay
    assert w.state.shares[("q", "A")].tags == {"team": "a"}


@pytest.mark.parametrize(
    ("arn", "tags", "code", "field"),
    [
        ("", {"a": "1"}, Code.INVALID_ARGUMENT, "resource_arn"),
        ("q", {"a": "1"}, Code.INVALID_ARGUMENT, "resource_arn"),
        (
            "arn:qm:batch:r:1:compute-environment/x",
            {"a": "1"},
            Code.INVALID_ARGUMENT,
            "resource_arn",
        ),
        (arns.job("nope"), {"a": "1"}, Code.NOT_FOUND, "resource_arn"),
        (arns.quota_share("q", "Z"), {"a": "1"}, Code.NOT_FOUND, "resource_arn"),
        (arns.job_queue("q"), {}, Code.INVALID_ARGUMENT, "tags"),
        (arns.job_queue("q"), {"AWS:x": "1"}, Code.INVALID_ARGUMENT, "tags"),
        (arns.job_queue("q"), {"": "1"}, Code.INVALID_ARGUMENT, "tags"),
        (arns.job_queue("q"), {"k": "v" * 257}, Code.INVALID_ARGUMENT, "tags"),
    ],
)
def test_bad_tags_are_refused(arn: str, tags: dict[str, str], code: Code, field: str) -> None:
    assert rejected(lambda: tag(world().state, arn, **tags)) == (code, field)


def test_at_most_50_tags_in_all_but_replacing_values_is_fine() -> None:
    w = world()
    queue = arns.job_queue("q")
    for event in tag(w.state, queue, **{f"k{i}": "v" for i in range(50)}):
        w.apply(event)

    assert tag(w.state, queue, k0="changed")  # replaces a value: still 50
    assert rejected(lambda: tag(w.state, queue, extra="1")) == (Code.INVALID_ARGUMENT, "tags")


# ---- documents ------------------------------------------------------------------------------


def test_a_finished_job_keeps_its_usage_and_its_latest_attempt() -> None:
    w = world()
    w.succeed("running")
    queued, done = (docs.job_doc(w.state, w.state.jobs[j]) for j in ("queued", "running"))

    assert done["capacity_usage"] == [{"capacity_unit": "ml.g5.xlarge", "quantity": 1}]
    assert done["latest_attempt"]["host_ids"] == list(w.state.jobs["running"].attempts[-1].hosts)
    assert done["scheduled_at"] == docs.epoch_ms(w.state.jobs["running"].attempts[-1].dispatched_at)
    assert (queued["capacity_usage"], queued["scheduled_at"]) == ([], 0)
    assert "latest_attempt" not in queued
    assert docs.job_summary(done)["latest_attempt"] == done["latest_attempt"]


def test_queue_priority_is_set_on_create_and_kept_unless_updated() -> None:
    w = world()
    w.environment("env2", ml_g5_xlarge=1)
    order = [pb.ServiceEnvironmentOrder(order=1, service_environment="env2")]

    def create(**fields: Any) -> list[ev.Event]:
        request = pb.CreateJobQueueRequest(
            job_queue_name="q2",
            scheduling_policy_arn="fifo",
            service_environment_order=order,
            **fields,
        )
        return validation.create_job_queue(request, w.state, at=NOW)

    (created,) = create(priority=7, tags={"t": "1"}, job_queue_type="SAGEMAKER_TRAINING")
    assert isinstance(created, ev.JobQueueCreated)
    assert (created.priority, created.tags) == (7, {"t": "1"})
    assert create()[0].priority == 1  # type: ignore[attr-defined]
    assert rejected(lambda: create(priority=1001)) == (Code.INVALID_ARGUMENT, "priority")
    assert rejected(lambda: create(job_queue_type="EKS")) == (
        Code.INVALID_ARGUMENT,
        "job_queue_type",
    )
    w.apply(created)
    (kept,) = validation.update_job_queue(
        pb.UpdateJobQueueRequest(job_queue="q2", state=pb.QUEUE_STATE_DISABLED), w.state, at=NOW
    )
    w.apply(kept)
    assert (w.state.queues["q2"].priority, w.state.queues["q2"].tags) == (7, {"t": "1"})
    doc = docs.queue_doc(w.state.queues["q2"])
    assert (doc["priority"], doc["job_queue_type"], doc["status"]) == (
        7,
        "SAGEMAKER_TRAINING",
        "RESOURCE_STATUS_VALID",
    )


def test_a_share_whose_finished_job_still_keeps_its_hosts_is_not_deleted() -> None:
    w = World()
    w.environment("env", ml_g5_xlarge=1)
    w.queue("q", "env")
    w.share("B", 1)
    w.hosts(1)
    w.submit(a_job(name="warm", keep_alive=600).in_share("B"), job_id="warm")
    w.pass_()
    w.start("warm")
    w.succeed("warm")  # the hosts stay until the pass makes them a warm pool
    w.apply(
        ev.QuotaShareUpdated(
            at=w.clock,
            job_queue="q",
            name="B",
            capacity_limits=(ev.CapacityLimit("ml.g5.xlarge", 1),),
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
            state=ev.State.DISABLED,
        )
    )
    delete = pb.DeleteQuotaShareRequest(job_queue="q", quota_share_name="B")

    assert w.state.jobs["warm"].retained
    assert rejected(lambda: validation.delete_quota_share(delete, w.state, at=NOW)) == (
        Code.FAILED_PRECONDITION,
        "quota_share_name",
    )
    w.pass_()  # now an Available pool: still refused, naming the pool
    assert rejected(lambda: validation.delete_quota_share(delete, w.state, at=NOW)) == (
        Code.FAILED_PRECONDITION,
        "quota_share_name",
    )
