"""Attempt records survive a restart, final report included."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import msgspec
import pytest

from qm_node_agent import records
from qm_node_agent.layout import Layout, container_name
from qm_node_agent.records import BLOCK, AttemptRecord, AttemptStore
from quartermaster import events as ev


def test_a_saved_record_loads_back_with_its_final_report(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.create()
    store = AttemptStore(layout)
    failed = ev.JobFailed(
        at=2.0,
        job_id="j",
        attempt=2,
        host="h1",
        reason="AlgorithmError: exit code 3",
        exit_code=3,
        log_tail="boom",
    )
    record = AttemptRecord(
        job_id="j",
        attempt=2,
        host="h1",
        runtime="process",
        chain_id="c",
        launched_at=1.0,
        pid=1234,
        outcome=failed,
    )

    store.save(record)

    assert store.exists("j", 2)
    assert store.load_all() == [record]
    assert AttemptStore(layout).load_all() == [record]  # read back from the file
    assert list(layout.attempts.iterdir()) == [layout.records_file]
    store.delete("j", 2)
    assert store.load_all() == []
    assert AttemptStore(layout).load_all() == []


def record_of(job_id: str, attempt: int = 1, **fields: object) -> AttemptRecord:
    return AttemptRecord(
        job_id=job_id,
        attempt=attempt,
        host="h1",
        runtime="process",
        chain_id=job_id,
        launched_at=1.0,
        **fields,  # type: ignore[arg-type]
    )


def test_updates_and_many_records_load_back_newest_first_slots_reused(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.create()
    store = AttemptStore(layout)
    records = {f"j{i}": record_of(f"j{i}") for i in range(40)}  # more than one growth
    for record in records.values():
        store.save(record)
    for i in range(0, 40, 2):  # an update writes the slot's other block
        records[f"j{i}"] = msgspec.structs.replace(records[f"j{i}"], pid=100 + i)
        store.save(records[f"j{i}"])
    for i in range(0, 40, 4):
        store.delete(f"j{i}", 1)
        del records[f"j{i}"]
    size = layout.records_file.stat().st_size
    store.save(record_of("new"))  # a freed slot, not a bigger file
    records["new"] = record_of("new")
    store.close()

    again = AttemptStore(layout)
    assert again.load_all() == sorted(records.values(), key=lambda r: r.key)
    assert layout.records_file.stat().st_size == size


def test_a_torn_write_leaves_the_previous_version(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.create()
    store = AttemptStore(layout)
    first = record_of("j")
    store.save(first)
    store.save(msgspec.structs.replace(first, pid=7))
    store.close()
    with open(layout.records_file, "r+b") as handle:  # the update's block, half written
        handle.seek(BLOCK + 30)
        handle.write(b"\xff" * 8)

    assert AttemptStore(layout).load_all() == [first]


def test_a_note_is_read_back_and_a_torn_one_leaves_the_durable_version(tmp_path: Path) -> None:
    """`note` writes unflushed: an agent restart reads it (the page cache has it); a
    host crash that tears it leaves the version saved before it."""
    layout = Layout(tmp_path)
    layout.create()
    store = AttemptStore(layout)
    first = record_of("j")
    store.save(first)
    noted = msgspec.structs.replace(first, pid=7, running_at=2.0)
    store.note(noted)
    store.note(record_of("other", pid=9))  # a record's first write may be a note too
    store.close()
    assert AttemptStore(layout).load_all() == [noted, record_of("other", pid=9)]

    with open(layout.records_file, "r+b") as handle:  # the note's block, half written
        handle.seek(BLOCK + 30)
        handle.write(b"\xff" * 8)
    again = AttemptStore(layout)
    assert again.load_all()[0] == first
    final = msgspec.structs.replace(first, outcome=None, pid=8)
    again.save(final)  # a later save supersedes both
    again.close()
    assert AttemptStore(layout).load_all()[0] == final


def test_records_of_the_one_file_layout_move_into_slots(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.create()
    old = record_of("old", 3, pid=42)
    layout.record("old", 3).write_bytes(msgspec.json.encode(old))

    assert AttemptStore(layout).load_all() == [old]
    assert not layout.record("old", 3).exists()
    assert AttemptStore(layout).load_all() == [old]


def test_an_unreadable_record_is_skipped(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    layout.create()
    layout.record("j", 1).write_text("{half")

    assert AttemptStore(layout).load_all() == []


def test_names_are_safe_for_files_and_containers() -> None:
    layout = Layout(Path("/d"))
    assert layout.record("a/../b", 1) == Path("/d/attempts/a_.._b.1.json")
    assert container_name("job_7-x", 3) == "qm-job_7-x-3"


def test_a_slow_fsync_does_not_block_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """persist() writes in a worker thread: the loop runs on while the disk is slow."""
    layout = Layout(tmp_path)
    layout.create()
    store = AttemptStore(layout)
    record = AttemptRecord(
        job_id="j", attempt=1, host="h1", runtime="process", chain_id="j", launched_at=1.0
    )
    release = threading.Event()
    store.save(record_of("other"))  # the file exists: the next save only flushes data
    real_fdatasync = os.fdatasync

    def stuck_fdatasync(fd: int) -> None:
        release.wait(10)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", stuck_fdatasync)

    async def scenario() -> list[str]:
        seen: list[str] = []
        saving = asyncio.create_task(store.persist(record))
        await asyncio.sleep(0.05)
        seen.append("loop ran while the record was being written")
        assert not saving.done()
        release.set()
        await saving
        seen.append("saved")
        return seen

    assert asyncio.run(scenario()) == ["loop ran while the record was being written", "saved"]
    assert store.load_all() == [record, record_of("other")]


def test_a_flush_is_under_way_when_it_returns_though_the_caller_holds_the_gil(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch that follows a flush holds the GIL: the flush's thread must have
    reached its `fdatasync` before the flush returns, or it would wait for the launch."""
    layout = Layout(tmp_path)
    layout.create()
    store = AttemptStore(layout)
    store.save(record_of("other"))  # the file exists: the flush only flushes data
    store.note(record_of("j"))
    monkeypatch.setattr(records, "HANDOFF_S", 10.0)  # no timing in the test
    entered: list[int] = []
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        entered.append(fd)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)

    async def scenario() -> int:
        await asyncio.to_thread(lambda: None)  # its thread is made and idle, as in an agent
        flushing = store.flush()
        under_way = len(entered)  # no await, no syscall since: the GIL never left here
        await flushing
        return under_way

    assert asyncio.run(scenario()) == 1
    assert AttemptStore(layout).load_all() == [record_of("j"), record_of("other")]
