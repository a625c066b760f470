"""A replay folds with the sorted indexes switched off and derives them at its end: the
state it leaves is the state the fold leaves event by event, and nothing reads an
index before they are derived."""

from __future__ import annotations

import pytest

from quartermaster import events as ev
from quartermaster.core import State, decide, fold, fold_all
from quartermaster.core.replay import ReplayInProgress, replaying
from quartermaster.testing.histories import realistic_log
from quartermaster.testing.state_image import image_of_entries


@pytest.fixture(scope="module")
def history() -> list[ev.Event]:
    return realistic_log(400, shares=4, hosts=40)


def folded(events: list[ev.Event], state: State | None = None) -> State:
    state = State() if state is None else state
    for event in events:
        fold(state, event)
    state.settle_indexes()
    return state


@pytest.mark.parametrize("cut", [0.25, 0.5, 0.75, 1.0])
def test_a_replay_leaves_the_state_the_fold_leaves(history: list[ev.Event], cut: float) -> None:
    events = history[: int(len(history) * cut)]  # queued, running and warm jobs left over
    replayed = fold_all(State(), events)
    eager = folded(events)
    assert image_of_entries(replayed) == image_of_entries(eager)
    assert decide(replayed) == decide(eager)


def test_a_replay_onto_a_state_in_use_derives_every_index(history: list[ev.Event]) -> None:
    half = len(history) // 2
    state = folded(history[:half])
    decide(state)  # read: the indexes hold entries from before the replay
    with replaying(state):
        for event in history[half:]:
            fold(state, event)
    assert image_of_entries(state) == image_of_entries(folded(history))


def test_an_index_read_inside_a_replay_raises_and_the_state_is_whole_after(
    history: list[ev.Event],
) -> None:
    state = State()
    with pytest.raises(ReplayInProgress), replaying(state):
        for event in history[:2000]:
            fold(state, event)
        decide(state)  # the pass reads the queues
    assert image_of_entries(state) == image_of_entries(folded(history[:2000]))


def test_a_replay_inside_a_replay_leaves_the_deriving_to_the_outer_one(
    history: list[ev.Event],
) -> None:
    state = State()
    with replaying(state):
        fold_all(state, history[:1000])
        with pytest.raises(ReplayInProgress):
            state.settle_indexes()
        fold_all(state, history[1000:2000])
    assert image_of_entries(state) == image_of_entries(folded(history[:2000]))
