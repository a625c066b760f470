"""Where a pass was decided: the verifier finds the base the scheduler had, as a live log has it.

A live scheduler folds, decides, then appends; node agents and admission append
meanwhile, and one pass for several queues lands as one message per queue.
"""

from __future__ import annotations

from logs import FIXTURES, decision_messages, edited

from quartermaster import events as ev
from quartermaster.audit import read_log, verify
from quartermaster.audit.logfile import from_batches
from quartermaster.core import decide, fold
from quartermaster.testing.builders import World, a_job


class Recorder:
    """A World whose inputs and passes are recorded as batches, in log order."""

    def __init__(self, w: World) -> None:
        self.w = w
        self.batches: list[list[ev.Event]] = [list(w.log)]

    def inputs(self, *events: ev.Event) -> None:
        for event in events:
            self.w.apply(event)
        self.batches.append(list(events))

    def submit(self, name: str, priority: int = 0) -> None:
        before = len(self.w.log)
        self.w.submit(a_job(name=name, share="A", priority=priority))
        self.batches.append(self.w.log[before:])

    def decided(self, decisions: list[ev.Event]) -> None:
        for d in decisions:
            fold(self.w.state, d)
        self.batches.append(decisions)

    def settle(self) -> None:
        while decisions := decide(self.w.state):
            self.decided(decisions)


def one_share(hosts: int) -> Recorder:
    w = World().environment(ml_g5_xlarge=hosts).queue().hosts(hosts)
    w.share("A", hosts, "RESERVE")
    return Recorder(w)


def test_a_heartbeat_lands_between_the_pass_and_its_append() -> None:
    r = one_share(2)
    r.submit("j1")
    decisions = decide(r.w.state)  # decided at the submit's time...
    r.w.clock += 0.5
    r.inputs(ev.HostHeartbeat(at=r.w.clock, host_id="h2"))  # ...a heartbeat lands first
    r.decided(decisions)
    r.w.clock += 1
    r.inputs(ev.JobStarting(at=r.w.clock, job_id="j1", attempt=1, host="h1"))
    r.submit("j2")
    r.settle()
    report = verify(from_batches(r.batches))
    assert report.ok, report.differences
    assert report.raced == 1 and report.passes == report.decision_messages


def test_a_request_at_the_same_time_lands_between_the_pass_and_its_append() -> None:
    """On the later state the pass would pick another job; on the one before, it did not."""
    r = one_share(1)
    r.submit("j1", priority=5)
    r.submit("j2", priority=1)
    decisions = decide(r.w.state)  # j1 on the only host
    r.inputs(ev.JobPriorityUpdated(at=r.w.clock, job_id="j2", scheduling_priority=9))
    r.decided(decisions)
    r.settle()
    report = verify(from_batches(r.batches))
    assert report.ok, report.differences
    assert report.raced == 1 and report.passes == report.decision_messages + 1


def test_one_pass_for_two_queues_sharing_hosts() -> None:
    """The pass hands the lowest free hosts to q1, the next to q2: two messages, one pass."""
    w = World().environment(ml_g5_xlarge=4).queue("q1").queue("q2").hosts(4)
    for queue in ("q1", "q2"):
        w.share("A", 2, "RESERVE", queue=queue)
    for i in range(2):
        w.submit(a_job(name=f"one{i}", queue="q1", share="A"))
        w.submit(a_job(name=f"two{i}", queue="q2", share="A"))
    decisions = decide(w.state)
    log = list(from_batches([list(w.log), decisions]))
    assert [e.subject for e in log[-2:]] == ["qm.decisions.q1", "qm.decisions.q2"]
    report = verify(log)
    assert report.ok, report.differences
    assert report.decision_messages == 2


def test_the_recorded_stack_logs_verify() -> None:
    """Logs exported from a whole stack (record_stack_seed.py): heartbeats, ticks, pools."""
    for name in ("seed-scenario-stack.jsonl", "busy-stack.jsonl"):
        report = verify(read_log(FIXTURES / name))
        assert report.ok, (name, report.differences[:2])
        assert report.decision_messages > 0 and not report.ignored


def test_a_forged_pool_bill_in_a_stack_log_is_caught() -> None:
    log = list(read_log(FIXTURES / "busy-stack.jsonl"))
    index, at = next(
        (i, j)
        for i in decision_messages(log)
        for j, e in enumerate(log[i].events)
        if isinstance(e, ev.WarmPoolReused)
    )
    bill = log[index].events[at]
    assert isinstance(bill, ev.WarmPoolReused)
    report = verify(edited(log, index, at, billable_seconds=bill.billable_seconds + 3600))
    assert report.differences[0].seq == log[index].seq
