"""Group commit of submissions: calls that queue behind an append share the next one.

The writer here is a stand-in that plans on a built state and records each group;
tests/integration/admission/test_group_commit.py drives the real writer and stream.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from qm_admission import access
from qm_admission.errors import RequestRejected
from qm_admission.group_commit import SubmitGroups
from qm_admission.ports import ReadModelPort
from qm_admission.settings import Settings
from qm_admission.submission import SubmissionPlanner
from qm_admission.writer import Plan, RequestWriter, Written
from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.auth import Principal, Role, ShareRef
from quartermaster.testing.builders import World

UNIT = "ml.g5.xlarge"
PAYLOAD = json.dumps({"ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1}})


def member(share: str) -> Principal:
    return Principal(
        subject=f"team-{share}",
        roles=frozenset({Role.MEMBER}),
        shares=frozenset({ShareRef("q", share)}),
    )


def a_submit(name: str, share: str = "QS1", **fields: Any) -> pb.SubmitServiceJobRequest:
    return pb.SubmitServiceJobRequest(
        job_name=name,
        job_queue="q",
        quota_share_name=share,
        service_request_payload=PAYLOAD,
        **fields,
    )


def world() -> World:
    w = World().environment(ml_g5_xlarge=4).queue()
    w.share("QS1", 2, "RESERVE")
    w.share("QS2", 2, "RESERVE")
    return w


class GatedWriter:
    """Plans each write on the world's state; the first append waits for `release`
    (it is in flight: planned, not yet acknowledged)."""

    def __init__(self, w: World) -> None:
        self.world = w
        self.release = asyncio.Event()
        self.groups: list[list[ev.AnyEvent]] = []
        self.max_envelope_bytes = 1 << 20

    async def write(self, planner: Any) -> Written[Any]:
        plan: Plan[Any] = await planner(self.world.state, self.world.clock)
        self.groups.append(list(plan.events))
        if len(self.groups) == 1:
            await self.release.wait()
        return Written(plan.result, len(self.groups), bool(plan.events))


async def planned(writer: GatedWriter) -> None:
    """Until the first append is planned (it is then in flight, held by the gate)."""
    while not writer.groups:
        await asyncio.sleep(0)


def groups_of(writer: GatedWriter, **limits: Any) -> SubmitGroups:
    """`limits`: SubmitGroups' own (max_jobs, linger_seconds, ...); else the defaults
    (the linger: admission's setting)."""
    planner = SubmissionPlanner(cast(ReadModelPort, None), max_keep_alive_seconds=3600)
    limits.setdefault("linger_seconds", Settings().submit_linger_seconds)
    return SubmitGroups(cast(RequestWriter, writer), planner, **limits)


async def as_caller(principal: Principal, groups: SubmitGroups, *names: str) -> Written[Any]:
    access.current.set(principal)  # this task's own context
    share = next(iter(principal.shares)).quota_share
    return await groups.submit([a_submit(n, share) for n in names])


async def test_calls_queued_behind_an_append_share_the_next_envelope() -> None:
    # given: one call's append in flight
    writer = GatedWriter(world())
    groups = groups_of(writer)
    first = asyncio.create_task(as_caller(member("QS1"), groups, "first"))
    await planned(writer)
    # when: ten more calls arrive meanwhile, then the first append completes
    rest = [
        asyncio.create_task(as_caller(member("QS1" if i % 2 else "QS2"), groups, f"j{i}"))
        for i in range(10)
    ]
    await asyncio.sleep(0)
    writer.release.set()
    answers = await asyncio.gather(first, *rest)
    # then: two envelopes, the second holding all ten, each call answered with its own job
    assert [len(g) for g in writer.groups] == [1, 10]
    assert (groups.appends, groups.calls) == (2, 11)
    assert [len(a.result) for a in answers] == [1] * 11
    assert answers[1].seq == answers[10].seq == 2


async def test_each_call_in_a_group_records_its_own_principal() -> None:
    # given
    writer = GatedWriter(world())
    groups = groups_of(writer)
    first = asyncio.create_task(as_caller(member("QS1"), groups, "first"))
    await planned(writer)
    a = asyncio.create_task(as_caller(member("QS1"), groups, "a1", "a2"))
    b = asyncio.create_task(as_caller(member("QS2"), groups, "b1"))
    await asyncio.sleep(0)
    # when
    writer.release.set()
    await asyncio.gather(first, a, b)
    # then
    submitted = [e for e in writer.groups[1] if isinstance(e, ev.JobSubmitted)]
    assert [(e.job_name, e.principal) for e in submitted] == [
        ("a1", "team-QS1"),
        ("a2", "team-QS1"),
        ("b1", "team-QS2"),
    ]
    assert [e.at for e in submitted] == sorted({e.at for e in submitted})  # FIFO across calls


async def test_a_refused_item_is_answered_to_its_call_only() -> None:
    # given
    writer = GatedWriter(world())
    groups = groups_of(writer)
    first = asyncio.create_task(as_caller(member("QS1"), groups, "first"))
    await planned(writer)
    good = asyncio.create_task(as_caller(member("QS1"), groups, "fine"))
    access.current.set(member("QS2"))
    bad = asyncio.create_task(
        groups.submit([a_submit("too-important", "QS2", scheduling_priority=10_000)])
    )
    await asyncio.sleep(0)
    # when
    writer.release.set()
    await first
    good_answer, bad_answer = await asyncio.gather(good, bad)
    # then
    assert isinstance(good_answer.result[0], pb.SubmitServiceJobResponse)
    refused = bad_answer.result[0]
    assert isinstance(refused, RequestRejected)
    assert refused.field == "scheduling_priority"


async def test_a_failed_append_fails_every_call_of_its_group() -> None:
    class Failing(GatedWriter):
        async def write(self, planner: Any) -> Written[Any]:
            raise TimeoutError("bus down")

    groups = groups_of(Failing(world()))
    results = await asyncio.gather(
        as_caller(member("QS1"), groups, "a"),
        as_caller(member("QS2"), groups, "b"),
        return_exceptions=True,
    )
    assert all(isinstance(r, TimeoutError) for r in results)


async def test_calls_a_step_short_of_the_queue_join_the_group() -> None:
    """A call that reaches `submit` one loop turn after the drain began (still in an
    interceptor when the writer started to plan) joins the group being planned."""
    # given: no append in flight
    writer = GatedWriter(world())
    writer.release.set()
    groups = groups_of(writer)

    async def one_step_behind() -> Written[Any]:
        await asyncio.sleep(0)
        return await as_caller(member("QS2"), groups, "second")

    # when: one call is queued, and another is one turn from the queue
    first = asyncio.create_task(as_caller(member("QS1"), groups, "first"))
    second = asyncio.create_task(one_step_behind())
    await asyncio.gather(first, second)
    # then: one envelope holds both
    assert [len(g) for g in writer.groups] == [2]
    assert (groups.appends, groups.calls) == (1, 2)


async def test_a_cancelled_call_leaves_its_group_and_the_drainer_whole() -> None:
    """A caller gone while its group's append is in flight (a client that hung up) is
    cancelled alone: the group is still written, the other calls get their answers,
    and the next call is served (the drainer did not die on the cancelled answer)."""
    # given: a group of two calls planned behind a first append in flight
    writer = GatedWriter(world())
    groups = groups_of(writer)
    first = asyncio.create_task(as_caller(member("QS1"), groups, "first"))
    await planned(writer)
    gone = asyncio.create_task(as_caller(member("QS1"), groups, "gone"))
    stays = asyncio.create_task(as_caller(member("QS2"), groups, "stays"))
    await asyncio.sleep(0)
    # when: one of them is cancelled before the first append completes
    gone.cancel()
    writer.release.set()
    answers = await asyncio.gather(first, stays)
    # then
    assert gone.cancelled()
    assert [len(a.result) for a in answers] == [1, 1]
    assert [len(g) for g in writer.groups] == [1, 2]  # the cancelled call's job went too
    later = await as_caller(member("QS2"), groups, "later")
    assert isinstance(later.result[0], pb.SubmitServiceJobResponse)
    assert (groups.appends, groups.calls) == (3, 4)


# ---- lingering under load ----------------------------------------------------------

LONG = 30.0  # a linger or gap no test may wait out: the guard below fails first
GUARD = 10.0


def lingering_groups(
    writer: GatedWriter, *, linger: float, gap: float, max_jobs: int = 1000
) -> SubmitGroups:
    return groups_of(writer, max_jobs=max_jobs, linger_seconds=linger, linger_gap_seconds=gap)


async def test_a_lone_call_never_lingers() -> None:
    # given: lingers and gaps far longer than the guard
    writer = GatedWriter(world())
    writer.release.set()
    groups = lingering_groups(writer, linger=LONG, gap=LONG)
    # when: lone calls, one after the other
    for name in ("one", "two", "three"):
        answer = await asyncio.wait_for(as_caller(member("QS1"), groups, name), GUARD)
        # then: each is planned and answered at once, alone
        assert isinstance(answer.result[0], pb.SubmitServiceJobResponse)
    assert [len(g) for g in writer.groups] == [1, 1, 1]


async def test_under_load_calls_that_keep_coming_join_until_the_envelope_is_full() -> None:
    # given: an append in flight and two calls waiting behind it; envelopes of 4 jobs
    writer = GatedWriter(world())
    groups = lingering_groups(writer, linger=LONG, gap=LONG, max_jobs=4)
    first = asyncio.create_task(as_caller(member("QS1"), groups, "first"))
    await planned(writer)
    waiting = [asyncio.create_task(as_caller(member("QS1"), groups, f"w{i}")) for i in range(2)]
    await asyncio.sleep(0)
    # when: the append completes (the planner lingers: calls wait behind the first),
    # then two more calls come, a few turns apart
    writer.release.set()
    late = []
    for i in range(2):
        for _ in range(3):
            await asyncio.sleep(0)
        late.append(asyncio.create_task(as_caller(member("QS2"), groups, f"late{i}")))
    await asyncio.wait_for(asyncio.gather(first, *waiting, *late), GUARD)
    # then: the linger ended as soon as four jobs waited, and they went together
    assert [len(g) for g in writer.groups] == [1, 4]


async def test_under_load_a_gap_with_no_new_call_ends_the_linger() -> None:
    # given: a long linger, a short gap
    writer = GatedWriter(world())
    groups = lingering_groups(writer, linger=LONG, gap=0.01)
    first = asyncio.create_task(as_caller(member("QS1"), groups, "first"))
    await planned(writer)
    waiting = [asyncio.create_task(as_caller(member("QS2"), groups, f"w{i}")) for i in range(2)]
    await asyncio.sleep(0)
    # when: the append completes and no call comes after
    writer.release.set()
    answers = await asyncio.wait_for(asyncio.gather(first, *waiting), GUARD)
    # then: the two waiting calls went together, after one gap, not the whole linger
    assert [len(g) for g in writer.groups] == [1, 2]
    assert [len(a.result) for a in answers] == [1, 1, 1]


async def test_under_load_the_linger_has_a_limit_while_calls_keep_coming() -> None:
    # given: a short linger, a long gap: only the limit can end the wait
    writer = GatedWriter(world())
    groups = lingering_groups(writer, linger=0.05, gap=LONG)
    first = asyncio.create_task(as_caller(member("QS1"), groups, "first"))
    await planned(writer)
    waiting = [asyncio.create_task(as_caller(member("QS2"), groups, f"w{i}")) for i in range(2)]
    await asyncio.sleep(0)
    # when
    writer.release.set()
    await asyncio.wait_for(asyncio.gather(first, *waiting), GUARD)
    # then
    assert [len(g) for g in writer.groups] == [1, 2]
