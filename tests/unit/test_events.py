"""Events: every type round-trips, tags are stable, and recorded logs still replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from quartermaster import events as ev
from quartermaster.core import State, decide, fold
from quartermaster.core.model import JobStatus
from quartermaster.core.provenance import FAMILIES, Family
from quartermaster.eventlog import decode_batch, encode_batch

FIXTURES = Path(__file__).parents[1] / "fixtures" / "logs"

# Tags are a wire contract: renaming one breaks every recorded log. Add, never change.
STABLE_TAGS = {
    "service_environment.created",
    "service_environment.updated",
    "scheduling_policy.created",
    "job_queue.created",
    "job_queue.updated",
    "quota_share.created",
    "quota_share.updated",
    "quota_share.deleted",
    "job.submitted",
    "job.priority_updated",
    "job.termination_requested",
    "job.dispatched",
    "job.preemption_requested",
    "job.timed_out",
    "job.status_reason_set",
    "job.stop_confirmed",
    "job.starting",
    "job.running",
    "job.succeeded",
    "job.failed",
    "job.retried",
    "job.finally_failed",
    "host.registered",
    "host.heartbeat",
    "host.lost",
    "host.drained",
    "host.undrained",
    "warm_pool.available",
    "warm_pool.in_use",
    "warm_pool.reused",
    "warm_pool.terminated",
    "warm_pool.keep_alive_updated",
    "clock.ticked",
    "service_environment.deleted",
    "scheduling_policy.updated",
    "scheduling_policy.deleted",
    "job_queue.deleted",
    "resource.tagged",
    "resource.untagged",
    "job.checkpointed",
}


def sample(tp: Any) -> Any:
    """A value of a msgspec type with every field set (non-default where possible)."""
    if isinstance(tp, msgspec.inspect.StructType):
        return tp.cls(**{f.name: sample(f.type) for f in tp.fields})
    if isinstance(tp, msgspec.inspect.UnionType):
        return sample(next(t for t in tp.types if not isinstance(t, msgspec.inspect.NoneType)))
    if isinstance(tp, msgspec.inspect.EnumType):
        return list(tp.cls)[-1]
    if isinstance(tp, msgspec.inspect.StrType):
        return "x-1"
    if isinstance(tp, msgspec.inspect.IntType):
        return 7
    if isinstance(tp, msgspec.inspect.FloatType):
        return 1234.5
    if isinstance(tp, msgspec.inspect.BoolType):
        return True
    if isinstance(tp, msgspec.inspect.VarTupleType | msgspec.inspect.ListType):
        return (sample(tp.item_type),) if isinstance(tp, msgspec.inspect.VarTupleType) else []
    if isinstance(tp, msgspec.inspect.DictType):
        return {"k": sample(tp.value_type)}
    raise TypeError(f"no sample for {tp}")


@pytest.mark.parametrize("event_type", ev.EVENT_TYPES, ids=lambda t: t.__name__)
def test_every_event_round_trips(event_type: type[ev.Event]) -> None:
    event = sample(msgspec.inspect.type_info(event_type))
    assert ev.decode(ev.encode(event)) == event
    assert ev.from_json(ev.to_json(event)) == event
    assert decode_batch(encode_batch([event, event])) == [event, event]


def test_tags_are_stable_and_unique() -> None:
    tags = [ev.tag_of(sample(msgspec.inspect.type_info(t))) for t in ev.EVENT_TYPES]
    assert len(tags) == len(set(tags))
    assert set(tags) == STABLE_TAGS


def test_old_messages_without_new_fields_still_decode() -> None:
    """Additive evolution: fields with defaults may be missing from older messages."""
    old = {
        "type": "job.submitted",
        "at": 1.0,
        "job_id": "j",
        "job_name": "n",
        "job_queue": "q",
        "quota_share": "s",
        "instance_type": "ml.g5.xlarge",
    }
    event = ev.from_json(json.dumps(old))
    assert isinstance(event, ev.JobSubmitted) and event.retry_attempts == 1


def replay(name: str) -> tuple[State, list[tuple[list[ev.AnyEvent], list[ev.Event]]]]:
    """Fold a recorded log; return the state and each decision batch with the pass's re-run."""
    state = State()
    batch: list[ev.AnyEvent] = []
    decided = False
    passes: list[tuple[list[ev.AnyEvent], list[ev.Event]]] = []
    for line in (FIXTURES / name).read_text().splitlines():
        record = json.loads(line)
        if not record["batch_end"]:
            batch.append(ev.from_json(json.dumps(record["event"])))
            decided = record["decision"]
            continue
        if decided:
            passes.append((batch, decide(state)))
        for event in batch:
            fold(state, event)
        batch = []
    return state, passes


def check_seed_state(state: State) -> None:
    statuses = {j.job_name: j.status for j in state.jobs.values()}
    assert statuses == {
        "high": JobStatus.SCHEDULED,  # low finished: high, next in QS1, runs again
        "med": JobStatus.RUNNABLE,
        "low": JobStatus.SUCCEEDED,
        "qs2_job_1": JobStatus.RUNNING,
    }
    assert state.jobs["med"].preempted_count == 1 and state.jobs["high"].preempted_count == 1


def preemptions(passes: list[tuple[list[ev.AnyEvent], list[ev.Event]]]) -> list[tuple[object, ...]]:
    return [
        (d.job_id, d.rule, d.for_job, d.lender_share, d.units_borrowed, d.priority_gap)
        for recorded, _ in passes
        for d in recorded
        if isinstance(d, ev.JobPreemptionRequested)
    ]


def test_recorded_seed_log_replays_to_the_same_state_and_decisions() -> None:
    """A log recorded before decisions carried their rule still replays: same state, and
    the pass re-run at each decision point decides what was recorded (in the fields the
    log holds; its preemptions upcast to the rule their text names)."""
    state, passes = replay("seed-scenario.jsonl")
    for recorded, rederived in passes:
        assert len(recorded) == len(rederived)
        assert all(ev.same_decision(r, d) for r, d in zip(recorded, rederived, strict=True))
    check_seed_state(state)
    assert preemptions(passes) == [
        ("med", ev.Rule.RECLAIM, "qs2_job_1", "QS2", None, None),
        ("high", ev.Rule.IN_SHARE, "low", None, None, None),
    ]


def predating_seconds_at_risk(decision: ev.Event) -> ev.Event:
    """A decision as a log recorded before preemptions carried `seconds_at_risk`."""
    if isinstance(decision, ev.JobPreemptionRequested):
        return msgspec.structs.replace(decision, seconds_at_risk=None)
    return decision


def test_a_log_recorded_with_reasons_replays_to_exactly_the_same_decisions() -> None:
    """Exactly, but for the one reason field the log predates (issue 28's seconds at risk)."""
    state, passes = replay("seed-scenario-reasons.jsonl")
    for recorded, rederived in passes:
        assert [predating_seconds_at_risk(d) for d in rederived] == recorded
        assert all(ev.same_decision(r, d) for r, d in zip(recorded, rederived, strict=True))
    check_seed_state(state)
    assert preemptions(passes) == [
        ("med", ev.Rule.RECLAIM, "qs2_job_1", "QS2", 1, None),
        ("high", ev.Rule.IN_SHARE, "low", None, None, 1),
    ]


def test_same_decision_reads_a_missing_reason_field_as_not_recorded() -> None:
    full = ev.JobDispatched(
        at=1, job_id="j", attempt=1, hosts=("h1",), rule=ev.Rule.BORROWED, share_units=2
    )
    old = ev.JobDispatched(at=1, job_id="j", attempt=1, hosts=("h1",))
    assert ev.same_decision(old, full)
    assert not ev.same_decision(full, old)  # a recorded reason must be re-derived
    assert not ev.same_decision(old, ev.JobDispatched(at=1, job_id="j", attempt=1, hosts=("h2",)))
    on_pool = ev.JobDispatched(at=1, job_id="j", attempt=1, hosts=("h1",), warm_pool="a")
    assert not ev.same_decision(old, on_pool)  # warm_pool None is a fact, not "unrecorded"


def test_every_decision_carries_a_rule() -> None:
    """What the pass writes (decision subjects) names the rule that made it."""
    decision_families = {Family.DECISIONS, Family.HOST_DECISIONS}
    decisions = [
        t
        for t in ev.EVENT_TYPES
        if FAMILIES[ev.tag_of(sample(msgspec.inspect.type_info(t)))] & decision_families
    ]
    assert len(decisions) == 11
    for event_type in decisions:
        assert "rule" in event_type.__struct_fields__, event_type.__name__
