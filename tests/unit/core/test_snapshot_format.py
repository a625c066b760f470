"""Snapshot format 2: round trip, the lean variant, and snapshots it cannot read."""

from __future__ import annotations

import msgspec
import pytest

from quartermaster import events as ev
from quartermaster.core import decide
from quartermaster.core.snapshot import FORMAT, SnapshotFormatError, restore, take
from quartermaster.testing.builders import World, a_job
from quartermaster.testing.invariants import snapshot as canonical


def a_busy_world() -> World:
    w = World()
    w.environment(ml_g5_xlarge=3).queue().hosts(3)
    w.share("QS1", 2, "LEND_AND_BORROW", preemption=True)
    w.share("QS2", 1, "RESERVE")
    for n in range(6):
        w.submit(a_job(name=f"j{n}", share="QS1" if n % 2 else "QS2", keep_alive=60 * (n % 2)))
    w.pass_()
    running = sorted(j for j, job in w.state.jobs.items() if job.hosts)
    w.start(running[0])
    w.succeed(running[0])
    w.pass_()
    w.apply(ev.JobPriorityUpdated(at=w.clock, job_id="j5", scheduling_priority=3))
    return w


def test_a_snapshot_restores_the_same_state_and_the_same_pass() -> None:
    w = a_busy_world()
    state, seq = restore(take(w.state, seq=42))
    assert seq == 42
    assert canonical(state) == canonical(w.state)
    assert state.runnable == w.state.runnable and state.victims == w.state.victims
    assert decide(state) == decide(w.state)


def test_a_lean_snapshot_leaves_out_payloads_only() -> None:
    w = a_busy_world()
    for job in w.state.jobs.values():
        job.payload = '{"HyperParameters": {"epochs": "3"}}'
    lean, _ = restore(take(w.state, seq=1, lean=True))
    assert all(job.payload == "" for job in lean.jobs.values())
    assert all(job.payload for job in w.state.jobs.values()), "the live state keeps them"
    assert decide(lean) == decide(w.state)
    for job in lean.jobs.values():
        job.payload = w.state.jobs[job.job_id].payload
    assert canonical(lean) == canonical(w.state)


def test_a_snapshot_of_another_format_is_refused_by_name() -> None:
    older = msgspec.msgpack.encode({"format": 1, "seq": 3, "jobs": [{"job_id": "j1"}]})
    with pytest.raises(SnapshotFormatError, match=f"format 1 is not {FORMAT}"):
        restore(older)
    with pytest.raises(SnapshotFormatError, match="unknown"):
        restore(b"\x00not a snapshot")
