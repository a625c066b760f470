"""Attempt records survive a restart, final report included."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from qm_node_agent.layout import Layout, container_name
from qm_node_agent.records import AttemptRecord, AttemptStore
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
    assert list(layout.attempts.iterdir()) == [layout.record("j", 2)]
    store.delete("j", 2)
    assert store.load_all() == []


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
    real_fsync = os.fsync

    def stuck_fsync(fd: int) -> None:
        release.wait(10)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", stuck_fsync)

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
    assert store.load_all() == [record]
