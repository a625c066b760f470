"""Kept folders and files: given back emptied, taken by rename (the same inode), capped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qm_node_agent import spares as spares_module
from qm_node_agent.spares import Spares


def test_a_folder_given_back_is_emptied_and_taken_again_as_the_same_inode(tmp_path: Path) -> None:
    spares = Spares(tmp_path / "spare")
    work = tmp_path / "jobs" / "a-1"
    work.mkdir(parents=True)
    (work / "sub").mkdir()
    (work / "sub" / "f").write_text("x")
    (work / "g").write_text("y")
    inode = work.stat().st_ino

    spares.give_dir(work)
    assert not work.exists()
    assert spares.count() == {"d": 1, "f": 0, "t": 0}

    again = tmp_path / "jobs" / "b-1"
    spares.take_dir(again)
    assert again.stat().st_ino == inode
    assert list(again.iterdir()) == []
    assert spares.count() == {"d": 0, "f": 0, "t": 0}


def test_a_folder_is_made_when_none_is_kept_and_kept_as_it_is_when_there(tmp_path: Path) -> None:
    spares = Spares(tmp_path / "spare")
    cache = tmp_path / "cache" / "chain"
    spares.take_dir(cache)
    (cache / "keep").write_text("warm")
    spares.take_dir(cache)  # a warm pool's cache: left as it is
    assert (cache / "keep").read_text() == "warm"


def test_a_file_given_back_is_truncated_and_renamed_over_the_next_path(tmp_path: Path) -> None:
    spares = Spares(tmp_path / "spare")
    exit_file = tmp_path / "a-1.exit"
    exit_file.write_text('{"exit_code": 3}')
    inode = exit_file.stat().st_ino
    spares.give_file(exit_file)

    stale = tmp_path / "b-1.exit"
    stale.write_text('{"exit_code": 0}')  # a stale status of an earlier launch goes
    spares.take_file(stale)
    assert stale.stat().st_ino == inode
    assert stale.read_bytes() == b""

    nothing_kept = tmp_path / "c-1.exit"
    nothing_kept.write_text("stale")
    spares.take_file(nothing_kept)
    assert not nothing_kept.exists()


def test_a_thing_in_the_way_of_a_folder_is_still_an_error_and_the_spare_stays(
    tmp_path: Path,
) -> None:
    spares = Spares(tmp_path / "spare")
    given = tmp_path / "old"
    given.mkdir()
    spares.give_dir(given)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file in the way")
    with pytest.raises(OSError):
        spares.take_dir(blocked)
    assert spares.count() == {"d": 1, "f": 0, "t": 0}


def test_past_the_limit_they_are_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spares_module, "LIMIT", 2)
    spares = Spares(tmp_path / "spare")
    for i in range(3):
        folder = tmp_path / f"w{i}"
        folder.mkdir()
        spares.give_dir(folder)
        assert not folder.exists()
    assert spares.count() == {"d": 2, "f": 0, "t": 0}


def test_kept_ones_are_found_again_after_a_restart_and_strays_removed(tmp_path: Path) -> None:
    root = tmp_path / "spare"
    first = Spares(root)
    for name in ("w", "x"):
        (tmp_path / name).mkdir()
        first.give_dir(tmp_path / name)
    (tmp_path / "e").write_text("1")
    first.give_file(tmp_path / "e")
    (root / "stray.tmp").write_text("?")
    (root / "f99").mkdir()  # a folder under a file's name: not a spare

    again = Spares(root)
    assert again.count() == {"d": 2, "f": 1, "t": 0}
    assert sorted(os.listdir(root)) == ["d0", "d1", "f2"]
    (tmp_path / "y").mkdir()
    again.give_dir(tmp_path / "y")
    assert (root / "d3").is_dir()  # names are never reused


def test_a_chain_tree_is_kept_with_its_skeleton_and_taken_by_the_next_chain(
    tmp_path: Path,
) -> None:
    """What jobs wrote goes; the folders and the config, hosts and mounts files stay
    (the same inodes), so the next chain's prepare makes none; a skeleton folder a job
    removed is made again, so that prepare need not look."""
    from qm_node_agent.contract.stage import MOUNTS, SKELETON, reset_chain_tree

    spares = Spares(tmp_path / "spare")
    chain = tmp_path / "opt-ml" / "c1"
    ml = chain / "ml"
    for sub in SKELETON:
        (ml / sub).mkdir(parents=True)
    (ml / "input" / "config" / "hyperparameters.json").write_text("{}")
    (ml / "input" / "data" / "train").mkdir()
    (ml / "input" / "data" / "train" / "a.csv").write_text("1")
    (ml / "model" / "m.bin").write_text("m")
    (ml / "output" / "data" / "r.txt").write_text("r")
    (ml / "output" / "failure").write_text("f")
    (ml / "checkpoints" / "step").write_text("3")
    (ml / "stray").write_text("s")
    (chain / "hosts").write_text("127.0.0.1 algo-1\n")
    (chain / "staged.json").write_text("{}")
    (chain / MOUNTS).write_text("a /opt/ml none bind 0 0\n")
    (ml / "code").rmdir()  # the job took it away
    config = (ml / "input" / "config" / "hyperparameters.json").stat().st_ino

    spares.give_tree(chain, reset_chain_tree)
    assert not chain.exists() and spares.count()["t"] == 1

    other = tmp_path / "opt-ml" / "c2"
    assert spares.take_tree(other)
    left = sorted(str(p.relative_to(other)) for p in other.rglob("*"))
    assert left == sorted(
        ["hosts", MOUNTS, "ml", "ml/input", "ml/input/config"]
        + ["ml/input/config/hyperparameters.json"]
        + [f"ml/{sub}" for sub in SKELETON if sub != "input/config"]
        + ["ml/output"]
    )
    assert (other / "ml" / "input" / "config" / "hyperparameters.json").stat().st_ino == config
    assert not spares.take_tree(tmp_path / "opt-ml" / "c3")  # none left: made by prepare
    assert not spares.take_tree(other)  # something there already: left alone
