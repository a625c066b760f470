"""A SortedIndex reads exactly as eager SortedList add/discard calls would have left it."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedList

from quartermaster.core.sorted_index import SortedIndex

KEYS = st.sampled_from(["a", "b", "c"])
ENTRIES = st.integers(min_value=0, max_value=4)  # few values: repeats, cancels, duplicates
OPS = st.lists(
    st.tuples(st.sampled_from(["put", "drop", "holds", "read", "fork"]), KEYS, ENTRIES),
    max_size=80,
)


def plain(index: dict[str, SortedList]) -> dict[str, list[int]]:
    return {key: list(found) for key, found in index.items()}


@settings(max_examples=400, deadline=None)
@given(OPS)
def test_reads_match_eager_sorted_lists(ops: list[tuple[str, str, int]]) -> None:
    eager: defaultdict[str, SortedList] = defaultdict(SortedList)
    lazy: SortedIndex[str] = SortedIndex()
    for op, key, entry in ops:
        if op == "put":
            eager[key].add(entry)
            lazy.put(key, entry)
        elif op == "drop":
            eager[key].discard(entry)
            lazy.drop(key, entry)
        elif op == "holds":
            assert lazy.holds(key, entry) == (entry in eager[key])
            lazy.setdefault(key, SortedList())  # `eager[key]` made the key; holds does not
        elif op == "read":
            assert list(lazy[key]) == list(eager[key])
        else:  # a fork changes apart from its original from now on
            forked = lazy.fork()
            forked.put(key, entry)
            forked.drop(key, entry + 1)
            want = {k: list(v) for k, v in eager.items()}
            want.setdefault(key, [])
            if entry + 1 in want[key]:
                want[key].remove(entry + 1)
            want[key] = sorted([*want[key], entry])
            assert plain(forked) == want
            assert plain(lazy) == plain(eager)  # the original is as it was
    assert plain(lazy) == plain(eager)


def test_keys_appear_as_with_a_defaultdict() -> None:
    """A drop of nothing still makes the key (eager code took `index[key]`)."""
    lazy: SortedIndex[str] = SortedIndex()
    lazy.drop("a", 1)
    lazy.put("b", 2)
    lazy.drop("b", 2)
    assert plain(lazy) == {"a": [], "b": []}


def test_a_fork_leaves_its_original_alone() -> None:
    lazy: SortedIndex[str] = SortedIndex()
    lazy.put("a", 1)
    forked = lazy.fork()
    forked.drop("a", 1)
    forked.put("a", 3)
    assert list(forked["a"]) == [3]
    assert list(lazy["a"]) == [1]
