"""quartermaster.files: whole-file writes and the stamps that tell a rewrite."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from quartermaster.files import stamp_of, write_whole


def test_a_file_is_replaced_whole_with_its_mode_and_no_temporary_file_left(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    assert write_whole(path, "one") is True
    assert write_whole(path, b"two") is True
    assert path.read_bytes() == b"two"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]


def test_keep_existing_keeps_the_file_someone_made_first(tmp_path: Path) -> None:
    path = tmp_path / "password"
    assert write_whole(path, "theirs", keep_existing=True) is True
    assert write_whole(path, "ours", keep_existing=True) is False
    assert path.read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["password"]


def test_a_rewrite_at_the_same_size_and_time_still_changes_the_stamp(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    assert stamp_of(path) is None
    write_whole(path, "aaaa")
    before = path.stat()
    first = stamp_of(path)
    write_whole(path, "bbbb")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # one tick of the clock
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert stamp_of(path) != first
