"""Kept job logs: whole under the cap, head and newest tail over it, offsets of the whole
output, a read into the dropped middle skips ahead and says so, retention prunes."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from qm_node_agent import joblogs
from qm_node_agent.joblogs import LogKeeper
from qm_node_agent.layout import Layout
from quartermaster.bus.joblogs import LogReply, LogRequest

JOB, ATTEMPT = "job-1", 2


def keeper(tmp_path: Path, cap: int = 1000, retention: float = 60.0) -> LogKeeper:
    layout = Layout(tmp_path)
    layout.create()
    return LogKeeper(layout, cap, retention)


def write_live(k: LogKeeper, data: bytes) -> None:
    k.layout.log_file(JOB, ATTEMPT).write_bytes(data)


def read_all(k: LogKeeper, offset: int = 0, max_bytes: int = 64) -> tuple[bytes, int, bool]:
    """Everything from `offset` as a client would read it: (bytes, skipped, complete)."""
    out, skipped, complete = b"", 0, False
    while True:
        reply: LogReply = k.read(
            LogRequest(job_id=JOB, attempt=ATTEMPT, offset=offset, max_bytes=max_bytes),
            running=False,
        )
        assert reply.found
        skipped += reply.skipped_bytes
        out += reply.data
        offset = reply.offset + len(reply.data)
        complete = reply.complete
        if not reply.data and not reply.skipped_bytes:
            return out, skipped, complete


def stem() -> str:
    return f"{JOB}-{ATTEMPT}"


def test_a_running_attempt_is_read_from_its_live_file_and_is_not_complete(tmp_path: Path) -> None:
    k = keeper(tmp_path)
    write_live(k, b"hello\nworld\n")
    reply = k.read(LogRequest(job_id=JOB, attempt=ATTEMPT, offset=6), running=True)
    assert (reply.found, reply.data, reply.offset, reply.complete) == (True, b"world\n", 6, False)


@pytest.mark.parametrize("hard_links", [True, False])
def test_a_log_under_the_cap_is_kept_whole_after_the_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hard_links: bool
) -> None:
    """Kept by a second name (no copy), or copied where the file system has no links."""
    if not hard_links:

        def no_link(*_: object) -> None:
            raise PermissionError("hard links are not supported here")

        monkeypatch.setattr(joblogs.os, "link", no_link)
    k = keeper(tmp_path)
    data = bytes(range(256)) * 3
    write_live(k, data)
    k.keep(stem(), ended_at=100.0)
    k.keep(stem(), ended_at=100.0)  # again (a restart while keeping): nothing changes
    assert not k.layout.log_file(JOB, ATTEMPT).exists()
    assert read_all(k) == (data, 0, True)


def test_a_log_over_the_cap_keeps_its_head_and_newest_tail(tmp_path: Path) -> None:
    k = keeper(tmp_path, cap=1000)
    data = b"".join(b"line %05d\n" % i for i in range(1000))  # 11000 bytes
    write_live(k, data)
    k.keep(stem(), ended_at=100.0)
    out, skipped, complete = read_all(k)
    assert complete
    assert skipped == len(data) - 1000
    assert out == data[:250] + data[-750:]
    # a reader that was in the middle when the log was capped resumes at the tail
    tail, skipped_mid, _ = read_all(k, offset=5000)
    assert tail == data[-750:]
    assert skipped_mid == len(data) - 750 - 5000
    # and one already in the tail continues where it was
    assert read_all(k, offset=len(data) - 10)[0] == data[-10:]


def test_no_log_is_found_for_an_attempt_never_run_here(tmp_path: Path) -> None:
    k = keeper(tmp_path)
    assert not k.read(LogRequest(job_id=JOB, attempt=ATTEMPT), running=False).found


def test_retention_prunes_kept_logs_of_attempts_that_ended_long_ago(tmp_path: Path) -> None:
    k = keeper(tmp_path, retention=60.0)
    write_live(k, b"x")
    k.keep(stem(), ended_at=100.0)
    assert k.prune(now=150.0) == 0
    assert k.read(LogRequest(job_id=JOB, attempt=ATTEMPT), running=False).found
    assert k.prune(now=161.0) == 1
    assert not k.read(LogRequest(job_id=JOB, attempt=ATTEMPT), running=False).found


def test_orphaned_live_logs_are_kept_at_start(tmp_path: Path) -> None:
    k = keeper(tmp_path)
    write_live(k, b"left behind\n")
    k.keep_orphans(live_stems=set(), now=100.0)
    assert read_all(k) == (b"left behind\n", 0, True)


def test_a_running_attempts_log_over_the_cap_frees_its_middle_and_reads_skip_it(
    tmp_path: Path,
) -> None:
    cap = 64 * 1024
    k = keeper(tmp_path, cap=cap)
    data = b"".join(b"%09d\n" % i for i in range(65536))  # 640 KiB, ten caps
    write_live(k, data)
    freed = k.trim_live(stem())
    if freed == 0:
        pytest.skip(f"the file system of {tmp_path} cannot punch holes (fallocate)")
    live = k.layout.log_file(JOB, ATTEMPT)
    assert live.stat().st_size == len(data)  # offsets stay: the writer appends as before
    assert live.stat().st_blocks * 512 <= len(data) - freed + 2 * 4096
    start = cap // 4  # 16 KiB: a whole number of blocks
    end = start + freed
    # a reader sees the head, then a skip to what is still there
    out, skipped = b"", 0
    offset = 0
    while True:
        reply = k.read(
            LogRequest(job_id=JOB, attempt=ATTEMPT, offset=offset, max_bytes=50_000),
            running=True,
        )
        if not reply.data and not reply.skipped_bytes:
            break
        out += reply.data
        skipped += reply.skipped_bytes
        offset = reply.offset + len(reply.data)
    assert skipped == freed
    assert out == data[:start] + data[end:]
    assert len(out) <= cap + 2 * 4096
    # more output, trimmed again: the hole grows, what is kept at the end is head + tail
    more = b"x" * (200 * 1024)
    with open(live, "ab") as handle:
        handle.write(more)
    assert k.trim_live(stem()) > 0
    k.keep(stem(), ended_at=1.0)
    whole = data + more
    assert read_all(k) == (whole[: cap // 4] + whole[-(cap - cap // 4) :], len(whole) - cap, True)


def test_a_whole_kept_log_has_no_note_and_ended_when_its_modification_time_says(
    tmp_path: Path,
) -> None:
    """No new file (inode) per attempt for the common case: the kept log says it all."""
    k = keeper(tmp_path, retention=60.0)
    write_live(k, b"done\n")
    k.keep(stem(), ended_at=1000.5)
    kept = k.layout.logs / f"{stem()}.log"
    assert sorted(p.name for p in k.layout.logs.iterdir()) == [kept.name]
    assert kept.stat().st_mtime == pytest.approx(1000.5)
    assert read_all(k) == (b"done\n", 0, True)
    assert k.prune(now=1060.0) == 0
    assert k.prune(now=1061.0) == 1
    assert list(k.layout.logs.iterdir()) == []


def test_a_capped_keep_cut_short_leaves_the_whole_live_log_readable_and_is_redone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The note comes before the capped log's kept name: a crash in between leaves a note
    and the live log, which reads whole; keeping again (at the agent's start) caps it."""
    k = keeper(tmp_path, cap=1000)
    data = b"".join(b"line %05d\n" % i for i in range(1000))
    write_live(k, data)
    real_replace = joblogs.os.replace

    def crash_on_the_log(src: str, dst: str) -> None:
        if str(dst).endswith(".log"):
            raise OSError("crash")
        real_replace(src, dst)

    monkeypatch.setattr(joblogs.os, "replace", crash_on_the_log)
    with pytest.raises(OSError):
        k.keep(stem(), ended_at=100.0)
    assert read_all(k, max_bytes=100_000) == (data, 0, True)  # still the live file
    monkeypatch.setattr(joblogs.os, "replace", real_replace)
    k.keep_orphans(live_stems=set(), now=200.0)
    out, skipped, _ = read_all(k)
    assert (out, skipped) == (data[:250] + data[-750:], len(data) - 1000)


def test_a_note_left_by_a_larger_log_does_not_cap_a_whole_one(tmp_path: Path) -> None:
    k = keeper(tmp_path, cap=1000)
    note = joblogs.KeptNote(size=5000, head=250, skipped=4000, ended_at=1.0)
    (k.layout.logs / f"{stem()}.json").write_bytes(msgspec.json.encode(note))
    write_live(k, b"short\n")
    k.keep(stem(), ended_at=100.0)
    assert read_all(k) == (b"short\n", 0, True)


def test_where_the_time_cannot_be_set_a_whole_log_gets_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_utime(*_: object) -> None:
        raise PermissionError("not here")

    monkeypatch.setattr(joblogs.os, "utime", no_utime)
    k = keeper(tmp_path, retention=60.0)
    write_live(k, b"done\n")
    k.keep(stem(), ended_at=100.0)
    assert (k.layout.logs / f"{stem()}.json").exists()
    assert read_all(k) == (b"done\n", 0, True)
    assert k.prune(now=150.0) == 0
    assert k.prune(now=161.0) == 1
