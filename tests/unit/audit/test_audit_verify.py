"""Replay audit: verify finds nothing on recorded and generated histories, and finds any edit."""

from __future__ import annotations

import importlib
import random
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import msgspec
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import initialize
from logs import decision_messages, edited, seed_log

from quartermaster import events as ev
from quartermaster.audit import Envelope, Format, read_log, verify, write_log
from quartermaster.audit.envelope import HOSTS_TOKEN, decision_token
from quartermaster.audit.errors import PermanentAuditError
from quartermaster.audit.logfile import from_batches

# The history generators of the core's property test, reused as they are.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
properties: Any = importlib.import_module("test_properties")


def test_the_recorded_seed_scenario_verifies() -> None:
    report = verify(seed_log())
    assert report.ok, report.differences
    assert report.decision_messages == 6 and report.decisions == 7
    assert report.passes >= report.decision_messages


def test_an_edited_dispatch_in_a_file_is_caught_at_its_sequence(tmp_path: Path) -> None:
    log = seed_log()
    first = decision_messages(log)[0]
    assert isinstance(log[first].events[1], ev.JobDispatched)
    forged = edited(log, first, 1, hosts=("h3",))  # med on QS3's held-back unit
    path = tmp_path / "forged.jsonl"
    write_log(path, forged)
    report = verify(read_log(path))
    assert not report.ok
    difference = report.differences[0]
    assert difference.seq == log[first].seq and difference.index == 1
    assert isinstance(difference.recorded, ev.JobDispatched)
    assert difference.recorded.hosts == ("h3",)
    assert isinstance(difference.rederived, ev.JobDispatched)
    assert difference.rederived.hosts == ("h2",)


def test_an_edited_preemption_victim_is_caught() -> None:
    log = seed_log()
    index = next(
        i for i in decision_messages(log) if isinstance(log[i].events[0], ev.JobPreemptionRequested)
    )
    report = verify(edited(log, index, 0, job_id="high"))  # reclaim high instead of med
    assert report.differences[0].seq == log[index].seq
    rederived = report.differences[0].rederived
    assert isinstance(rederived, ev.JobPreemptionRequested) and rederived.job_id == "med"


def test_a_deleted_decision_is_caught() -> None:
    log = seed_log()
    index = decision_messages(log)[0]
    e = log[index]
    log[index] = Envelope(e.seq, e.subject, e.events[:1])  # med's dispatch removed
    report = verify(log)
    first = report.differences[0]
    assert first.seq == e.seq and first.recorded is None
    assert isinstance(first.rederived, ev.JobDispatched) and first.rederived.job_id == "med"


def test_a_msgpack_export_verifies_like_the_json_one(tmp_path: Path) -> None:
    path = tmp_path / "seed.qmlog"
    write_log(path, seed_log(), Format.MSGPACK)
    assert path.read_bytes().startswith(b"QMLOG1\n")
    assert verify(read_log(path)).ok


def test_a_log_that_does_not_start_at_seq_one_is_refused() -> None:
    with pytest.raises(PermanentAuditError, match="from seq 1"):
        verify(seed_log()[3:])


def test_a_decision_forged_on_the_request_subject_is_ignored_and_reported() -> None:
    log = seed_log()
    index = decision_messages(log)[0]
    e = log[index]
    forged = Envelope(e.seq, "qm.requests", e.events)
    log[index] = forged
    report = verify(log)
    assert {i.kind for i in report.ignored} == {"job.dispatched"}
    assert not report.ok  # the real decisions now come later than the pass gives them


# ---- generated histories -----------------------------------------------------------


def _mutations(event: ev.Event, rng: random.Random) -> list[tuple[str, Any]]:
    """(field, new value) edits of one decision: every field with a value, each changed."""
    out: list[tuple[str, Any]] = []
    for name in event.__struct_fields__:
        value = getattr(event, name)
        if isinstance(value, Enum):
            others = [m for m in type(value) if m is not value]
            if others:
                out.append((name, rng.choice(others)))
        elif isinstance(value, bool):
            out.append((name, not value))
        elif isinstance(value, int | float):
            out.append((name, value + 1))
        elif isinstance(value, str):
            out.append((name, value + "~"))
        elif isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            out.append((name, (*value, "h99")))
    return out


def mutate(log: list[Envelope], rng: random.Random) -> tuple[list[Envelope], int, str]:
    """One decision changed, dropped or doubled; returns the log, the seq hit and what."""
    decided = [
        (i, j)
        for i, e in enumerate(log)
        if decision_token(e.subject) not in (None, HOSTS_TOKEN)
        for j in range(len(e.events))
    ]
    i, j = rng.choice(decided)
    e = log[i]
    events = list(e.events)
    kind = rng.choice(["edit", "edit", "edit", "drop", "double"])
    edits = _mutations(events[j], rng)
    if kind == "edit" and edits:
        name, value = rng.choice(edits)
        events[j] = msgspec.structs.replace(events[j], **{name: value})
        what = f"{ev.tag_of(events[j])}.{name} -> {value!r}"
    elif kind == "double":
        events.insert(j, events[j])
        what = f"{ev.tag_of(events[j])} doubled"
    else:
        what = f"{ev.tag_of(events[j])} dropped"
        del events[j]
    out = list(log)
    out[i] = Envelope(e.seq, e.subject, events)
    return out, e.seq, what


class AuditedHistory(properties.SchedulerHistory):  # type: ignore[misc]
    """The core's random histories, recorded as a log: verify passes; any edit is caught."""

    @initialize(seed=st.integers(0, 2**32 - 1))
    def pick_seed(self, seed: int) -> None:
        self.seed = seed

    def teardown(self) -> None:
        super().teardown()
        log = list(from_batches(batch for _, batch in self.batches))
        report = verify(log)
        assert report.ok, report.differences[:3]
        if not any(decision_token(e.subject) not in (None, HOSTS_TOKEN) for e in log):
            return
        rng = random.Random(self.seed)
        for _ in range(3):
            forged, seq, what = mutate(log, rng)
            report = verify(forged)
            assert report.differences, f"not caught: {what} at seq {seq}"
            assert report.differences[0].seq == seq, f"{what}: first difference elsewhere"


TestAuditedHistory = AuditedHistory.TestCase
TestAuditedHistory.settings = settings(
    max_examples=int(properties.os.environ.get("QM_PROPERTY_EXAMPLES", "40")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_a_warm_pool_decision_naming_an_unknown_host_is_a_difference_not_a_crash() -> None:
    # given: a forger adds a host the log never registered to a pool's hosts
    log = list(read_log(Path(__file__).resolve().parents[2] / "fixtures/logs/busy-stack.jsonl"))
    index, event_index = next(
        (i, j)
        for i in decision_messages(log)
        for j, e in enumerate(log[i].events)
        if isinstance(e, ev.WarmPoolAvailable)
    )
    pool = log[index].events[event_index]
    assert isinstance(pool, ev.WarmPoolAvailable)
    forged = edited(log, index, event_index, hosts=(*pool.hosts, "h99"))
    # when
    report = verify(forged)
    # then
    assert not report.ok
    assert report.differences[0].seq == log[index].seq
