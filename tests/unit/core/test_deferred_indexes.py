"""The fold's sorted indexes take its changes when read: a state read only at the end
of a history is the state read after every event, and the one a snapshot rebuilds."""

from __future__ import annotations

import pytest

from quartermaster import events as ev
from quartermaster.core import State, decide, fold
from quartermaster.core.snapshot import restore, take
from quartermaster.testing.histories import realistic_log
from quartermaster.testing.state_image import image

INDEXES = ("runnable", "victims", "free_unbound", "free_bound", "available_pools")


@pytest.fixture(scope="module")
def history() -> list[ev.Event]:
    return realistic_log(400, shares=4, hosts=40)


def test_the_history_has_the_events_the_indexes_follow(history: list[ev.Event]) -> None:
    kinds = {type(e) for e in history}
    assert {ev.JobDispatched, ev.JobSucceeded, ev.JobRetried, ev.WarmPoolAvailable} <= kinds
    assert {ev.WarmPoolTerminated, ev.JobPreemptionRequested, ev.JobStopConfirmed} <= kinds


def test_read_at_the_end_is_read_after_every_event(history: list[ev.Event]) -> None:
    deferred, eager = State(), State()
    for position, event in enumerate(history):
        fold(deferred, event)
        fold(eager, event)
        eager.settle_indexes()
        if position % 500 == 0:  # reads in between change nothing either
            assert decide(deferred) == decide(eager)
    assert image(deferred) == image(eager)


def test_a_snapshot_rebuilds_the_same_indexes(history: list[ev.Event]) -> None:
    halfway = State()
    for event in history[: len(history) // 2]:  # jobs queued, running and warm
        fold(halfway, event)
    restored, _ = restore(take(halfway, seq=0))
    mine, rebuilt = image(halfway), image(restored)
    for name in INDEXES:
        nonempty = {k: v for k, v in mine[name].items() if v}
        assert nonempty == {k: v for k, v in rebuilt[name].items() if v}, name
    assert halfway.deadlines == restored.deadlines
    assert list(halfway.pool_expiries) == list(restored.pool_expiries)
    assert decide(halfway) == decide(restored)
