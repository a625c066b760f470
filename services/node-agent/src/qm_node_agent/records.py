"""Attempt records: what this host launched, kept on disk so a restart never launches twice.

A record is written BEFORE the runtime starts the job, updated with where the
job runs (pid, container) and, before the final report is appended, with that
report. It is forgotten once the folded log shows the attempt is over on this host.

Records live in slots of one file (`Layout.records_file`), written in place
and made durable with `fdatasync`: the file's blocks were allocated and
written when it grew, so a save changes no metadata and costs one data flush,
not the two journal commits of a new file renamed into place (fsync of the
file, then of its folder). Each slot holds two blocks; a save writes the one
that does not hold the newest version, with a version number and a CRC, so a
write torn by a crash leaves the previous version readable. Records from the
older one-file-per-attempt layout are moved into slots when the store opens.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
import zlib
from pathlib import Path

import msgspec

from qm_node_agent.contract.spec import Outputs
from qm_node_agent.layout import Layout
from quartermaster import events as ev

log = logging.getLogger(__name__)

HANDOFF_S = 0.001  # how long `flush` waits for its thread to run (mostly 0.05-0.1 ms)

Outcome = ev.JobSucceeded | ev.JobFailed | ev.JobStopConfirmed
Key = tuple[str, int]

BLOCK = 16384  # bytes per version of a slot (a record with a 2 KiB log tail fits)
GROW = 16  # slots added when every slot is taken
_HEADER = struct.Struct("<4sQII")  # magic, version, payload length, crc32 of payload
_MAGIC = b"QMAR"


class AttemptRecord(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    attempt: int
    host: str
    runtime: str
    chain_id: str
    launched_at: float
    container: str = ""  # docker: the container name
    pid: int | None = None  # process: the wrapper's pid (its process group id too)
    exit_file: str = ""  # process: where the wrapper writes the exit status
    log_file: str = ""
    running_at: float | None = None  # when this host reported JobRunning
    outcome: Outcome | None = None  # the final report, saved before it is appended
    outputs: Outputs | None = None  # where the training job's outputs go once it ends
    # The position of the host view it was launched from: a view older than that (a feed
    # read after a restart, before its newest view was stored) knows nothing of it.
    view_seq: int = 0

    @property
    def key(self) -> Key:
        return (self.job_id, self.attempt)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AttemptRecord)
_json_decoder = msgspec.json.Decoder(AttemptRecord)  # the older layout's files


class _Slot:
    """Which of a slot's two blocks holds its newest version, and that version."""

    __slots__ = ("block", "version")

    def __init__(self, block: int, version: int) -> None:
        self.block = block
        self.version = version


class AttemptStore:
    """Thread-safe: `persist` saves in worker threads, several at once (their flushes
    overlap). One attempt's saves come one after another (its runner awaits each)."""

    def __init__(self, layout: Layout) -> None:
        self._layout = layout
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0  # saves writing or flushing now
        self._fd: int | None = None
        self._count = 0  # slots in the file
        self._version = 0  # the newest version written or found
        self._slots: dict[int, _Slot] = {}  # slot -> its newest version (if any is valid)
        self._where: dict[Key, int] = {}  # live record -> its slot
        self._records: dict[Key, AttemptRecord] = {}
        self._free: list[int] = []

    def save(self, record: AttemptRecord) -> None:
        """Write durably: one block in place, then `fdatasync`."""
        payload = _encode(record)
        with self._lock:
            fd, slot, block, version = self._claim(record)
            self._busy += 1
        try:
            _write(fd, slot, block, version, payload)
            os.fdatasync(fd)
        finally:
            with self._lock:
                self._busy -= 1
                self._idle.notify_all()
        with self._lock:
            self._slots[slot] = _Slot(block, version)
            self._records[record.key] = record

    def note(self, record: AttemptRecord) -> None:
        """Write without a flush (for what guards nothing: a restart can do without it).

        One block in the page cache, on the caller's thread: it survives an agent
        crash, and the next flush of the file writes it out. A host crash may lose or
        tear it; the slot's other block still holds the previous version."""
        payload = _encode(record)
        with self._lock:
            fd, slot, block, version = self._claim(record)
            _write(fd, slot, block, version, payload)
            self._slots[slot] = _Slot(block, version)
            self._records[record.key] = record

    async def persist(self, record: AttemptRecord) -> None:
        """`save` in a worker thread: the flush never blocks the agent's event loop."""
        await asyncio.to_thread(self.save, record)

    def sync(self) -> None:
        """Make every write so far durable (one `fdatasync`), and keep a slot free, so
        that the next `note` of a new record changes no metadata on the caller's thread."""
        with self._lock:
            fd = self._open()
            self._busy += 1
            if not self._free:
                self._grow(fd)
        try:
            os.fdatasync(fd)
        finally:
            with self._lock:
                self._busy -= 1
                self._idle.notify_all()

    def flush(self) -> asyncio.Future[None]:
        """`sync` in a worker thread, begun at once (a task would begin it only at the
        loop's next turn, after the caller's launch).

        The caller then waits, `HANDOFF_S` at most, until the thread runs: a woken
        thread waits for the GIL, which the caller's launch holds until it awaits (the
        switch interval is 5 ms), so the `fdatasync` used to begin only after the
        launch. Handed over, it runs during the launch: 0.5 or 1.5 ms of the loop's work
        then a flush took 1.22 and 2.31 ms in all (p50), 0.92 and 1.97 handed over."""
        running = threading.Event()

        def sync() -> None:
            running.set()
            self.sync()

        future = asyncio.get_running_loop().run_in_executor(None, sync)
        running.wait(HANDOFF_S)
        return future

    def exists(self, job_id: str, attempt: int) -> bool:
        with self._lock:
            self._open()
            return (job_id, attempt) in self._where

    def delete(self, job_id: str, attempt: int) -> None:
        """Free the record's slot. Not flushed (like an unlink without a folder fsync):
        the next flush of the file, or the kernel, writes it out."""
        with self._lock:
            fd = self._open()
            slot = self._where.pop((job_id, attempt), None)
            self._records.pop((job_id, attempt), None)
            if slot is None:
                return
            block, version = self._next(slot)
            _write(fd, slot, block, version, b"")
            self._slots[slot] = _Slot(block, version)
            self._free.append(slot)

    def load_all(self) -> list[AttemptRecord]:
        with self._lock:
            self._open()
            return [self._records[key] for key in sorted(self._records)]

    def close(self, timeout: float = 10.0) -> None:
        """Close the file once the saves in flight are written (a worker thread goes on
        with a save whose task was cancelled)."""
        with self._lock:
            self._idle.wait_for(lambda: self._busy == 0, timeout)
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)
            self._count = self._version = 0
            self._slots.clear()
            self._where.clear()
            self._records.clear()
            self._free.clear()

    # ---- the file ------------------------------------------------------------------
    def _open(self) -> int:
        """The file, opened (and read) on first use; under the lock."""
        if self._fd is not None:
            return self._fd
        path = self._layout.records_file
        created = not path.exists()
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._fd = fd
        size = os.fstat(fd).st_size
        self._count = size // (2 * BLOCK)
        for slot in range(self._count):
            self._read_slot(fd, slot)
        if created:
            _fsync_folder(path.parent)
        self._move_files_in(fd)
        if not self._free:  # room for the next launch now, not on its way to start
            self._grow(fd)
        return fd

    def _read_slot(self, fd: int, slot: int) -> None:
        newest: tuple[int, int, bytes] | None = None  # version, block, payload
        for block in (0, 1):
            found = _parse(os.pread(fd, BLOCK, _offset(slot, block)))
            if found is not None and (newest is None or found[0] > newest[0]):
                newest = (found[0], block, found[1])
        if newest is None:
            self._free.append(slot)
            return
        version, block, payload = newest
        self._version = max(self._version, version)
        self._slots[slot] = _Slot(block, version)
        if not payload:
            self._free.append(slot)
            return
        try:
            record = _decoder.decode(payload)
        except msgspec.DecodeError:
            log.exception("unreadable attempt record in slot %d skipped", slot)
            return  # its slot stays taken: nothing overwrites what could not be read
        self._where[record.key] = slot
        self._records[record.key] = record

    def _move_files_in(self, fd: int) -> None:
        """Records of the older layout (one JSON file each) go into slots, then away."""
        folder = self._layout.attempts
        for path in sorted(folder.glob("*.json")):
            try:
                record = _json_decoder.decode(path.read_bytes())
            except (OSError, msgspec.DecodeError):
                log.exception("unreadable attempt record %s skipped", path)
                continue
            if record.key not in self._where:
                slot = self._where[record.key] = self._take_slot(fd)
                block, version = self._next(slot)
                _write(fd, slot, block, version, _encode(record))
                os.fdatasync(fd)
                self._slots[slot] = _Slot(block, version)
                self._records[record.key] = record
            path.unlink()

    def _claim(self, record: AttemptRecord) -> tuple[int, int, int, int]:
        """(file, slot, block, version) the record's next write goes to; under the lock."""
        fd = self._open()
        slot = self._where.get(record.key)
        if slot is None:
            slot = self._where[record.key] = self._take_slot(fd)
        block, version = self._next(slot)
        return fd, slot, block, version

    def _take_slot(self, fd: int) -> int:
        if not self._free:
            self._grow(fd)
        return self._free.pop()

    def _grow(self, fd: int) -> None:
        start = self._count
        # Real zeros, flushed with the size: later saves then change no metadata.
        os.pwrite(fd, bytes(2 * BLOCK * GROW), _offset(start, 0))
        os.fsync(fd)
        self._count += GROW
        self._free.extend(range(self._count - 1, start - 1, -1))

    def _next(self, slot: int) -> tuple[int, int]:
        """The block to write next (the one not holding the newest) and its version."""
        self._version += 1
        current = self._slots.get(slot)
        return (0 if current is None else 1 - current.block), self._version


def _encode(record: AttemptRecord) -> bytes:
    """The record's bytes; an outcome too large for a block is cut (its log tail and
    reason first: what a restart needs is which report it was)."""
    payload = _encoder.encode(record)
    room = BLOCK - _HEADER.size
    if len(payload) > room and isinstance(record.outcome, ev.JobFailed):
        failed = record.outcome
        cut = msgspec.structs.replace(failed, log_tail="", reason=failed.reason[:1024])
        payload = _encoder.encode(msgspec.structs.replace(record, outcome=cut))
    if len(payload) > room:
        raise ValueError(f"attempt record {record.key} too large ({len(payload)} bytes)")
    return payload


def _offset(slot: int, block: int) -> int:
    return (2 * slot + block) * BLOCK


def _write(fd: int, slot: int, block: int, version: int, payload: bytes) -> None:
    header = _HEADER.pack(_MAGIC, version, len(payload), zlib.crc32(payload))
    os.pwrite(fd, header + payload, _offset(slot, block))


def _parse(data: bytes) -> tuple[int, bytes] | None:
    """(version, payload) of a block written whole, else None (never written, or torn)."""
    if len(data) < _HEADER.size:
        return None
    magic, version, length, crc = _HEADER.unpack_from(data)
    if magic != _MAGIC or length > len(data) - _HEADER.size:
        return None
    payload = data[_HEADER.size : _HEADER.size + length]
    if zlib.crc32(payload) != crc:
        return None
    return version, payload


def _fsync_folder(folder: Path) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
