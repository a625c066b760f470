"""`qm log import` against a real nats-server: each message back at its seq, or a refusal."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from audit_seed import append_seed

from quartermaster.audit import Format, read_log, verify
from quartermaster.audit.errors import LogFileError
from quartermaster.audit.export import export
from quartermaster.audit.log_import import RestoreRefusedError, import_log, open_target
from quartermaster.audit.settings import AuditSettings
from quartermaster.audit.stream import open_log, read_through
from quartermaster.bus import JetStreamLog, LogEntry
from quartermaster.cli.bus import AuditorAccess, StackFile, write_stack_file
from quartermaster.cli.main import main
from quartermaster.embedded.nats_auth import BusLayout
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.testing.servers import SecuredBus


def settings_of(url: str, stream: str, prefix: str) -> AuditSettings:
    return AuditSettings(nats_url=url, stream=stream, subject_prefix=prefix)


async def entries(settings: AuditSettings) -> list[LogEntry]:
    async with open_log(settings) as event_log:
        last = await event_log.last_seq()
        return [entry async for entry in read_through(event_log, 1, last)]


@pytest_asyncio.fixture
async def target(nats_server: EmbeddedNats, jetstream_log: JetStreamLog) -> AsyncIterator[str]:
    """The name of a stream that does not exist yet (deleted after the test)."""
    name = f"{jetstream_log.stream}_R"[:60]
    yield name
    async with await JetStreamLog.connect(nats_server.url, name, "restored") as made:
        await made.delete_stream()


@pytest.mark.parametrize("fmt", list(Format))
async def test_an_import_stores_every_message_at_its_seq_with_its_bytes(
    nats_server: EmbeddedNats,
    jetstream_log: JetStreamLog,
    target: str,
    tmp_path: Path,
    fmt: Format,
) -> None:
    await append_seed(jetstream_log)
    source = settings_of(nats_server.url, jetstream_log.stream, jetstream_log.prefix)
    out = tmp_path / f"log.{fmt.value}"
    await export(source, out, fmt)
    into = settings_of(nats_server.url, target, "restored")
    layout = BusLayout(stream=target, subject_prefix="restored")
    async with open_target(into, layout) as event_log:  # the stream is made on the way
        done = await import_log(event_log, out, layout.snapshot_bucket)
    assert (done.messages, done.moved_from) == (19, jetstream_log.prefix)

    before, after = await entries(source), await entries(into)
    assert [(e.seq, e.data) for e in after] == [(e.seq, e.data) for e in before]
    assert [e.subject.removeprefix("restored") for e in after] == [
        e.subject.removeprefix(jetstream_log.prefix) for e in before
    ]
    again = tmp_path / "again.jsonl"
    await export(into, again)
    assert verify(read_log(again)).ok

    async with open_target(into, layout) as event_log:  # now it holds the log: refused
        with pytest.raises(RestoreRefusedError, match="already holds 19 messages"):
            await import_log(event_log, out, layout.snapshot_bucket)
    assert len(await entries(into)) == 19


async def test_a_bad_file_leaves_the_stream_untouched(
    nats_server: EmbeddedNats, jetstream_log: JetStreamLog, target: str, tmp_path: Path
) -> None:
    await append_seed(jetstream_log)
    source = settings_of(nats_server.url, jetstream_log.stream, jetstream_log.prefix)
    out = tmp_path / "part.jsonl"
    await export(source, out)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:10] + lines[11:]))  # seq 11 is missing
    layout = BusLayout(stream=target, subject_prefix="restored")
    into = settings_of(nats_server.url, target, "restored")
    async with open_target(into, layout) as event_log:
        with pytest.raises(LogFileError, match="jumps from 10 to seq 12"):
            await import_log(event_log, out, layout.snapshot_bucket)
        assert await event_log.last_seq() == 0


async def test_qm_log_import_logs_in_as_the_stacks_admin(
    secured_bus: SecuredBus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Beside a stack file naming the admin user, `qm log import --data-dir` needs nothing
    else; a second import into the now full stream is refused in one line, exit 1."""
    exported = tmp_path / "seed.jsonl"
    admin = await secured_bus.connect(SecuredBus.ADMIN)
    try:
        stored = await append_seed(admin)
        who = secured_bus.credentials(SecuredBus.ADMIN)
        source = AuditSettings(
            nats_url=secured_bus.url,
            stream=admin.stream,
            subject_prefix=admin.prefix,
            nats_user=who.user,
            nats_password=who.password,
        )
        await export(source, exported)
        await admin.js.delete_stream(admin.stream)  # an empty cluster: the import makes it
    finally:
        await admin.close()
    data_dir = tmp_path / "stack"
    data_dir.mkdir()
    password_file = secured_bus.passwords.password_file(SecuredBus.ADMIN)
    write_stack_file(
        data_dir,
        StackFile(
            grpc_address="127.0.0.1:1",
            nats_url=secured_bus.url,
            stream=secured_bus.layout.stream,
            subject_prefix=secured_bus.layout.subject_prefix,
            admin=AuditorAccess(user=SecuredBus.ADMIN, password_file=str(password_file)),
        ),
    )
    argv = ["log", "import", str(exported), "--data-dir", str(data_dir)]
    argv += ["--snapshot-bucket", secured_bus.layout.snapshot_bucket]
    assert await asyncio.to_thread(main, argv) == 0
    assert capsys.readouterr().out.startswith(f"imported {len(stored)} messages")

    assert await asyncio.to_thread(main, argv) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("qm: error: stream ") and "already holds" in line


async def test_with_nothing_listening_the_import_ends_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "empty.jsonl"
    exported.write_text("")
    url = "nats://127.0.0.1:9"  # discard: nothing answers NATS there
    started = time.monotonic()
    status = await asyncio.to_thread(main, ["log", "import", str(exported), "--nats-url", url])
    took = time.monotonic() - started
    assert status == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("qm: error: no answer from the bus at nats://127.0.0.1:9")
    print(f"\nnothing listening: exit 1 after {took:.1f} s")
