"""Emptied folders and files of ended attempts, kept for the next ones instead of deleted.

Each attempt of the process runtime needs a working folder, often a cache folder,
and an exit file; deleting them when it ends and making new ones for the next
costs little on most file systems, but not on ext4 without a journal (the disk of
this kind of VM, and of some cloud hosts): a new inode is searched for past every
inode freed in the last 60 seconds, 360 while its inode table block is dirty
(`recently_deleted` in ext4's inode allocator),
so at 75 attempts/s a folder and a file took 1.8 ms of kernel CPU to make, against
0.11 ms to rename kept ones into place (figures in docs/design-shared-fold.md). A kept
one is renamed into place (no inode is freed or made); one given back is emptied
and renamed into `Layout.spares`. At most `LIMIT` of each kind are kept; past
that, they are deleted.

A process of a job that escaped its wrapper's process group (it made a session of
its own) and outlived the attempt would now write into a folder that a later
attempt works in, where before it wrote into a deleted one: the process runtime
isolates nothing of the kind anyway (jobs run as the agent's user).

Thread-safe: attempts take on the agent's loop, and give back in worker threads.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

LIMIT = 256
_DIR, _FILE, _TREE = "d", "f", "t"


def empty_folder(folder: Path, keep: tuple[str, ...] = ()) -> None:
    """Remove what is in `folder` but the names in `keep`; nothing when it is gone."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name in keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


class Spares:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._kept: dict[str, list[str]] | None = None  # kind -> names under root
        self._names = itertools.count()

    def take_dir(self, path: Path) -> None:
        """`path` a folder: kept as it is if there, else an empty kept one renamed
        there, else a new one."""
        if path.is_dir():
            return
        if not self._place(_DIR, path):  # something in the way: the mkdir says what
            path.mkdir(parents=True, exist_ok=True)

    def take_file(self, path: Path) -> None:
        """An empty file at `path` (what was there goes), if one is kept; else nothing
        is there any more."""
        if not self._place(_FILE, path):
            path.unlink(missing_ok=True)

    def give_dir(self, path: Path) -> None:
        """Empty `path` and keep it (blocking: run in a worker thread)."""
        if not path.is_dir() or path.is_symlink():
            return
        empty_folder(path)
        if not self._keep(_DIR, path):
            shutil.rmtree(path, ignore_errors=True)

    def take_tree(self, path: Path) -> bool:
        """A kept tree (a warm pool chain's /opt-ml folder, reset by `give_tree`'s
        `reset`) renamed to `path` if nothing is there; whether one was."""
        return not path.exists() and self._place(_TREE, path)

    def give_tree(self, path: Path, reset: Callable[[Path], None]) -> None:
        """Keep the tree at `path` once `reset` has emptied what a job left in it
        (its skeleton stays: no inode freed now, none made by the next chain);
        deleted past the limit (blocking: run in a worker thread)."""
        if not path.is_dir() or path.is_symlink():
            return
        try:
            reset(path)
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
            return
        if not self._keep(_TREE, path):
            shutil.rmtree(path, ignore_errors=True)

    def give_file(self, path: Path) -> None:
        """Empty the file at `path` and keep it (blocking: run in a worker thread)."""
        try:
            os.truncate(path, 0)
        except FileNotFoundError:
            return
        except OSError:  # not a plain file, or not ours to write: not kept
            path.unlink(missing_ok=True)
            return
        if not self._keep(_FILE, path):
            path.unlink(missing_ok=True)

    def count(self) -> dict[str, int]:
        """How many of each kind are kept ("d": folders, "f": files, "t": trees)."""
        with self._lock:
            kept = self._listed()
            return {kind: len(names) for kind, names in kept.items()}

    # ---- the kept ones ---------------------------------------------------------------
    def _keep(self, kind: str, path: Path) -> bool:
        with self._lock:
            kept = self._listed()
            if len(kept[kind]) >= LIMIT:
                return False
            name = f"{kind}{next(self._names)}"
        try:
            os.rename(path, self.root / name)
        except OSError:
            return False
        self._push(kind, name)
        return True

    def _place(self, kind: str, path: Path) -> bool:
        """A kept one of `kind` renamed to `path`; False when none is kept or the
        rename fails (it stays kept then)."""
        name = self._pop(kind)
        if name is None:
            return False
        try:
            os.rename(self.root / name, path)
            return True
        except OSError:
            self._push(kind, name)
            return False

    def _pop(self, kind: str) -> str | None:
        with self._lock:
            names = self._listed()[kind]
            return names.pop() if names else None

    def _push(self, kind: str, name: str) -> None:
        with self._lock:
            self._listed()[kind].append(name)

    def _listed(self) -> dict[str, list[str]]:
        """The kept ones, listed from disk once (under the lock); names never reused."""
        if self._kept is None:
            self.root.mkdir(parents=True, exist_ok=True)
            kept: dict[str, list[str]] = {_DIR: [], _FILE: [], _TREE: []}
            highest = -1
            for entry in os.scandir(self.root):
                kind, number = entry.name[:1], entry.name[1:]
                is_dir = entry.is_dir(follow_symlinks=False)
                if number.isdigit() and (kind, is_dir) in (
                    (_DIR, True),
                    (_FILE, False),
                    (_TREE, True),
                ):
                    kept[kind].append(entry.name)
                    highest = max(highest, int(number))
                elif is_dir:
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            self._names = itertools.count(highest + 1)
            self._kept = kept
        return self._kept
