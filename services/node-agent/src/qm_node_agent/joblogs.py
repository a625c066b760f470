"""Each attempt's output, kept after the attempt ends: capped, for a retention period.

While an attempt runs its output grows in its live file (`Layout.log_file`);
`trim_live`, every few seconds, frees the disk blocks of a live file's middle once it
is over the cap (a hole punched with fallocate: offsets stay, the writer never
notices) and notes the hole beside it. Once the log says the attempt is over on this
host, `keep` moves it to `logs/`: whole if it is at most `cap_bytes`, else its
first quarter of the cap and its newest three quarters, with a small JSON note of
what was dropped (written before the capped log takes its kept name). A whole log
has no note: its size is its own, and its modification time is set to when the
attempt ended. A note is a new file, and a new inode costs about 0.5 ms of kernel
CPU on ext4 without a journal (spares.py says why): at a hundred short jobs a
second, the agent's largest cost after the job's own process. `prune` deletes kept
logs whose attempt ended more than `retention_s` ago.

Offsets are bytes of the attempt's whole output, live or kept; a read into the
dropped middle skips to the tail and says how many bytes it skipped.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from qm_node_agent.layout import Layout
from quartermaster.bus import joblogs as wire
from quartermaster.bus.joblogs import LogReply, LogRequest
from quartermaster.files import write_whole

log = logging.getLogger(__name__)

_COPY_BYTES = 1024 * 1024


class KeptNote(msgspec.Struct, frozen=True, kw_only=True):
    size: int  # bytes the attempt wrote in all
    head: int  # bytes kept from the start; the rest kept are the newest
    skipped: int  # bytes dropped after the head
    ended_at: float


class LiveHole(msgspec.Struct, frozen=True, kw_only=True):
    """Bytes [start, end) of a running attempt's live file whose blocks were freed."""

    start: int
    end: int


class LogKeeper:
    def __init__(self, layout: Layout, cap_bytes: int, retention_s: float) -> None:
        self.layout = layout
        self.cap_bytes = cap_bytes
        self.retention_s = retention_s

    # ---- keeping ---------------------------------------------------------------
    def keep(self, stem: str, ended_at: float) -> None:
        """Move the live log `jobs/<stem>.log` to `logs/`, capped (blocking: run in a thread)."""
        live = self.layout.jobs / f"{stem}.log"
        kept, note_path = self._kept(stem)
        try:
            size = live.stat().st_size
        except FileNotFoundError:
            return
        self.layout.logs.mkdir(parents=True, exist_ok=True)
        head = size if size <= self.cap_bytes else self.cap_bytes // 4
        tail = 0 if size <= self.cap_bytes else self.cap_bytes - head
        if tail:
            skipped = size - head - tail
            note = KeptNote(size=size, head=head, skipped=skipped, ended_at=ended_at)
            _write_note(note_path, note)  # before the capped log takes its kept name
            _copy_parts(live, kept, ((0, head), (size - tail, tail)))
            log.info("kept log %s: %d bytes over the cap dropped", stem, skipped)
        else:
            note_path.unlink(missing_ok=True)  # one left by a capped keep cut short
            if not _linked(live, kept):  # no hard links here: copied
                _copy_parts(live, kept, ((0, size),))
            _mark_ended(kept, ended_at, note_path, size)
        live.unlink(missing_ok=True)
        self._hole(stem).unlink(missing_ok=True)

    def trim_live(self, stem: str) -> int:
        """Free the blocks of a live file's middle over the cap; returns the bytes freed.

        What is freed is what `keep` drops anyway: it keeps the first quarter of the cap
        and the newest three quarters, so a running job cannot fill the disk either.
        """
        live = self.layout.jobs / f"{stem}.log"
        try:
            size = live.stat().st_size
        except FileNotFoundError:
            return 0
        head = self.cap_bytes // 4
        tail = self.cap_bytes - head
        start = -(-head // _BLOCK) * _BLOCK  # whole blocks only, inside the dropped middle
        end = (size - tail) // _BLOCK * _BLOCK
        hole_path = self._hole(stem)
        known = _read_hole(hole_path)
        if end <= start or (known is not None and end <= known.end):
            return 0
        with open(live, "r+b") as handle:
            if not _punch(handle.fileno(), start, end - start):
                return 0
        write_whole(hole_path, msgspec.json.encode(LiveHole(start=start, end=end)), mode=0o644)
        return end - (known.end if known is not None else start)

    def keep_orphans(self, live_stems: set[str], now: float) -> None:
        """Keep live logs no record owns any more (the agent stopped while keeping)."""
        for path in self.layout.jobs.glob("*.log"):
            if path.stem not in live_stems:
                self.keep(path.stem, now)

    def prune(self, now: float) -> int:
        """Delete kept logs older than the retention period; returns how many."""
        pruned = 0
        with os.scandir(self.layout.logs) as entries:
            names = {entry.name for entry in entries}
        for name in names:
            stem, dot, suffix = name.rpartition(".")
            if not dot or suffix not in ("log", "json"):
                continue
            if suffix == "log" and f"{stem}.json" in names:
                continue  # its note says when it ended
            kept, note_path = self._kept(stem)
            note = _read_note(note_path) if suffix == "json" else _whole(kept)
            if note is not None and now - note.ended_at <= self.retention_s:
                continue
            note_path.unlink(missing_ok=True)
            kept.unlink(missing_ok=True)
            pruned += 1
        return pruned

    # ---- reading -------------------------------------------------------------------
    def read(self, request: LogRequest, *, running: bool) -> LogReply:
        """`request.max_bytes` of the attempt's output from `request.offset` (blocking)."""
        stem = self.layout.log_file(request.job_id, request.attempt).stem
        limit = max(1, request.max_bytes)
        hole = _read_hole(self._hole(stem))
        offset, skipped, end = request.offset, 0, None
        if hole is not None and hole.start <= offset < hole.end:
            offset, skipped = hole.end, hole.end - offset
        elif hole is not None and offset < hole.start:
            end = hole.start  # stop at the hole: the next read says it
        try:
            with open(self.layout.jobs / f"{stem}.log", "rb") as live:
                live.seek(offset)
                data = live.read(limit if end is None else min(limit, end - offset))
            return LogReply(
                found=True, data=data, offset=offset, skipped_bytes=skipped, complete=not running
            )
        except FileNotFoundError:
            pass  # not live (any more): kept, or gone
        kept, note_path = self._kept(stem)
        note = self._note(kept, note_path)
        if note is None:
            return LogReply(found=False)
        offset, skipped = request.offset, 0
        if note.head <= offset < note.head + note.skipped:
            offset, skipped = note.head + note.skipped, note.head + note.skipped - offset
        if offset < note.head:
            position, end = offset, note.head  # stop at the gap: the next read says it
        else:
            position, end = offset - note.skipped, note.size - note.skipped
        try:
            with open(kept, "rb") as source:
                source.seek(position)
                data = source.read(max(0, min(limit, end - position)))
        except FileNotFoundError:  # pruned between the note and the log
            return LogReply(found=False)
        return LogReply(found=True, data=data, offset=offset, skipped_bytes=skipped, complete=True)

    def _hole(self, stem: str) -> Path:
        return self.layout.jobs / f"{stem}.hole.json"

    def _kept(self, stem: str) -> tuple[Path, Path]:
        return self.layout.logs / f"{stem}.log", self.layout.logs / f"{stem}.json"

    @staticmethod
    def _note(kept: Path, note_path: Path) -> KeptNote | None:
        """What of the attempt's output `kept` holds: its note's word, else all of it;
        None when neither is there."""
        return _read_note(note_path) or _whole(kept)


def _linked(live: Path, kept: Path) -> bool:
    """Give the whole live log its kept name too, without a copy (the live name goes once
    the note is written); False where the file system has no hard links."""
    kept.unlink(missing_ok=True)
    try:
        os.link(live, kept)
    except OSError:
        return False
    return True


def _copy_parts(live: Path, kept: Path, parts: tuple[tuple[int, int], ...]) -> None:
    """The (offset, count) parts of `live`, in order, under the name `kept` once written."""
    tmp = kept.with_suffix(".tmp")
    with open(live, "rb") as source, open(tmp, "wb") as target:
        for offset, count in parts:
            source.seek(offset)
            _copy(source, target, count)
    os.replace(tmp, kept)


def _copy(source: BinaryIO, target: BinaryIO, count: int) -> None:
    left = count
    while left > 0:
        block = source.read(min(_COPY_BYTES, left))
        if not block:
            return
        target.write(block)
        left -= len(block)


_BLOCK = 4096
_FALLOC_FL_KEEP_SIZE = 0x01
_FALLOC_FL_PUNCH_HOLE = 0x02
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
_unsupported_warned = False


def _punch(fd: int, offset: int, length: int) -> bool:
    """Free the blocks of [offset, offset + length); reads there give zeros after it."""
    global _unsupported_warned
    mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
    if _libc.fallocate(fd, mode, offset, length) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EOPNOTSUPP, errno.ENOSYS) and not _unsupported_warned:
        _unsupported_warned = True
        log.warning("this file system cannot punch holes: running jobs' logs are not capped")
    elif code not in (errno.EOPNOTSUPP, errno.ENOSYS):
        log.warning("cannot free a live log's middle: %s", os.strerror(code))
    return False


def _read_hole(path: Path) -> LiveHole | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=LiveHole)
    except (OSError, msgspec.DecodeError):
        return None


def _whole(kept: Path) -> KeptNote | None:
    """A kept log without a note: all of the output, ended at its modification time."""
    try:
        found = kept.stat()
    except FileNotFoundError:
        return None
    size = found.st_size
    return KeptNote(size=size, head=size, skipped=0, ended_at=found.st_mtime)


def _mark_ended(kept: Path, ended_at: float, note_path: Path, size: int) -> None:
    """A whole kept log ended when its modification time says; a note where that
    time cannot be set."""
    try:
        os.utime(kept, (ended_at, ended_at))
    except OSError:
        _write_note(note_path, KeptNote(size=size, head=size, skipped=0, ended_at=ended_at))


def _write_note(path: Path, note: KeptNote) -> None:
    write_whole(path, msgspec.json.encode(note), mode=0o644)


def _read_note(path: Path) -> KeptNote | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=KeptNote)
    except (OSError, msgspec.DecodeError):
        return None


async def serve_logs(
    nc: Any, prefix: str, host: str, keeper: LogKeeper, running: Callable[[str, int], bool]
) -> Any:
    """Answer admission's log requests on this host's subject; returns the subscription.

    `running(job_id, attempt)`: is the attempt still running here (more output may come)?
    """

    async def answer(msg: Any) -> None:
        try:
            request = wire.decode_request(msg.data)
        except msgspec.DecodeError:
            log.warning("host=%s log request that does not decode: ignored", host)
            return
        live = running(request.job_id, request.attempt)
        reply = await asyncio.to_thread(keeper.read, request, running=live)
        await msg.respond(wire.encode(reply))

    return await nc.subscribe(wire.logs_subject(prefix, host), cb=answer)
