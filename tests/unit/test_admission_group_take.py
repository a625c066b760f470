"""Group commit takes its group when the writer plans, not before it waits.

The writer holds its lock and folds its previous append before it plans; calls that
arrive during that wait must join the group being planned (one append), and a call
that arrives alone is planned at once (no linger). The writer here is a stand-in
that waits on an event where the real one waits for the fold.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from qm_admission.group_commit import SubmitGroups
from qm_admission.settings import Settings
from qm_admission.submission import Outcome, SubmissionPlanner
from qm_admission.writer import Plan, Planner, RequestWriter, Written
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.auth import Principal
from quartermaster.core import State


class FoldingWriter:
    """Waits for `folded` before each plan, as the writer waits for its last append."""

    def __init__(self) -> None:
        self.folded = asyncio.Event()
        self.planned: list[int] = []  # calls per group, in order

    async def write(self, planner: Planner[Any]) -> Written[Any]:
        await self.folded.wait()
        planned = planner(State(), 0.0)
        plan = await planned if not isinstance(planned, Plan) else planned
        return Written(plan.result, len(self.planned), True)


class NamingPlanner:
    """Answers each request with its job name; counts the calls of each group."""

    def __init__(self, writer: FoldingWriter) -> None:
        self._writer = writer

    async def plan_group(
        self,
        calls: list[tuple[Principal, list[pb.SubmitServiceJobRequest]]],
        state: State,
        now: float,
    ) -> Plan[list[list[pb.SubmitServiceJobResponse]]]:
        self._writer.planned.append(len(calls))
        results = [
            [pb.SubmitServiceJobResponse(job_name=r.job_name) for r in rs] for _, rs in calls
        ]
        return Plan([], results)


def groups(writer: FoldingWriter) -> SubmitGroups:
    planner = cast(SubmissionPlanner, NamingPlanner(writer))
    return SubmitGroups(
        cast(RequestWriter, writer), planner, linger_seconds=Settings().submit_linger_seconds
    )


def name_of(written: Written[list[Outcome]]) -> str:
    (outcome,) = written.result
    assert isinstance(outcome, pb.SubmitServiceJobResponse)
    return outcome.job_name


def request(name: str) -> pb.SubmitServiceJobRequest:
    return pb.SubmitServiceJobRequest(job_name=name)


async def test_calls_arriving_while_the_writer_folds_join_its_group() -> None:
    # given: a first call whose write waits for the fold of the previous append
    writer = FoldingWriter()
    submit = groups(writer)
    first = asyncio.create_task(submit.submit([request("a")]))
    await asyncio.sleep(0.01)
    # when: two more calls arrive during that wait, then the fold completes
    later = [asyncio.create_task(submit.submit([request(n)])) for n in ("b", "c")]
    await asyncio.sleep(0.01)
    writer.folded.set()
    answers = await asyncio.gather(first, *later)
    # then: one group of three calls, each answered with its own outcome
    assert writer.planned == [3]
    assert [name_of(a) for a in answers] == ["a", "b", "c"]


async def test_a_lone_call_is_planned_without_waiting_for_company() -> None:
    # given: a writer with nothing to fold
    writer = FoldingWriter()
    writer.folded.set()
    submit = groups(writer)
    # when
    answer = await asyncio.wait_for(submit.submit([request("alone")]), timeout=5)
    # then
    assert writer.planned == [1]
    assert name_of(answer) == "alone"
