"""A follower's folded state leaves the cyclic GC's walks once caught up, and what it
folds later leaves them again every so many events (`eventlog.long_lived`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from quartermaster.eventlog.long_lived import Refreezer


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the session collects as before


def _walked(obj: object) -> bool:
    """Would a full collection walk `obj` (is it in a collected generation)?"""
    return any(o is obj for o in gc.get_objects())


def test_caught_up_state_is_frozen_and_later_growth_every_so_many_events() -> None:
    refreezer = Refreezer(every=10)
    folded = [[f"attempt {n}"] for n in range(3)]  # lists, as a job's attempts are
    assert _walked(folded[0])
    refreezer.caught_up(seq=5)
    assert not _walked(folded[0]) and not _walked(folded)

    later = [["a job folded after the freeze"]]
    assert refreezer.tend(seq=14) is False  # 9 events since: not yet
    assert _walked(later[0])
    assert refreezer.tend(seq=15) is True
    assert not _walked(later[0])
    assert refreezer.freezes == 2


def test_garbage_is_collected_before_a_freeze_not_frozen() -> None:
    """A cycle that is garbage at the freeze is freed by it, not kept forever."""
    freed: list[str] = []

    class Node:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            freed.append("node")

    Node()  # unreachable at once, but only the cyclic GC can free it
    Refreezer().caught_up(seq=0)
    assert freed == ["node"]
