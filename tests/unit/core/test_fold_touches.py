"""The fold's frequent handlers do their event's touch themselves (`core.fold._FUSED`),
with the job they look up anyway: event by event, they must count exactly what
`core.changes.touch` counts, or an incremental pass would skip a queue that changed."""

from __future__ import annotations

from collections import defaultdict

import pytest

from quartermaster import events as ev
from quartermaster.core import State, changes, fold
from quartermaster.core.fold import _FUSED, fold_all
from quartermaster.core.snapshot import take
from quartermaster.testing.histories import realistic_log


@pytest.fixture(scope="module")
def history() -> list[ev.Event]:
    return realistic_log(400, shares=4, hosts=40)


def counted(state: State) -> tuple[dict[str, int], int]:
    return {q: n for q, n in state.queue_version.items() if n}, state.config_version


def fold_checking_touches(state: State, history: list[ev.Event]) -> set[type[ev.Event]]:
    """Fold `history`, checking each event's counters against `changes.touch` on the
    state as it was; the event types seen."""
    seen: set[type[ev.Event]] = set()
    for event in history:
        queues, config = dict(state.queue_version), state.config_version
        changes.touch(state, event)
        want = counted(state)
        state.queue_version, state.config_version = defaultdict(int, queues), config
        fold(state, event)
        assert counted(state) == want, event
        seen.add(type(event))
    return seen


def test_fused_handlers_touch_what_changes_says(history: list[ev.Event]) -> None:
    seen = fold_checking_touches(State(), history)
    assert set(_FUSED) <= seen  # every fused handler was exercised


def test_the_same_for_jobs_the_fold_forgot(history: list[ev.Event]) -> None:
    """With retention, reports and decisions may name jobs no longer folded."""
    state = State()
    state.retention_seconds = 5.0
    fold_checking_touches(state, history)
    late = [
        ev.JobSucceeded(at=state.now, job_id="j0000001", attempt=1, host="h00000"),
        ev.JobDispatched(
            at=state.now, job_id="gone", attempt=1, hosts=("h00000",), warm_pool="j0000002"
        ),
        ev.WarmPoolInUse(at=state.now, job_id="gone", from_job="j0000003"),
        ev.WarmPoolReused(
            at=state.now, job_id="j0000004", reused_by_job="gone", billable_seconds=1
        ),
        ev.WarmPoolAvailable(
            at=state.now,
            job_id="gone",
            hosts=(),
            expires_at=state.now + 1,
            chain_id="gone",
            chain_started_at=0,
        ),
    ]
    fold_checking_touches(state, late)


def test_fold_all_folds_as_fold_does(history: list[ev.Event]) -> None:
    """`fold_all` inlines `fold`'s steps: the same state, counters and retention."""
    one_by_one, at_once = State(), State()
    for state in (one_by_one, at_once):
        state.retention_seconds = 30.0
    for event in history:
        fold(one_by_one, event)
    fold_all(at_once, history)
    assert take(one_by_one, seq=0) == take(at_once, seq=0)
    assert counted(one_by_one) == counted(at_once)
    assert (one_by_one.seq, one_by_one.next_sweep) == (at_once.seq, at_once.next_sweep)
