"""Export -> verify round trip against a real nats-server, through the library and `qm`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from audit_seed import append_seed

from quartermaster import events as ev
from quartermaster.audit import Format, read_log, verify
from quartermaster.audit.export import export
from quartermaster.audit.settings import AuditSettings
from quartermaster.audit.stream import open_log, read_range
from quartermaster.bus import JetStreamLog
from quartermaster.cli.main import main
from quartermaster.embedded.nats_auth import Role, user_name
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.eventlog import encode_batch, subjects
from quartermaster.testing.servers import SecuredBus

AUDITOR = user_name(Role.AUDITOR)


def settings_for(nats: EmbeddedNats, event_log: JetStreamLog) -> AuditSettings:
    return AuditSettings(
        nats_url=nats.url, stream=event_log.stream, subject_prefix=event_log.prefix
    )


@pytest.mark.parametrize("fmt", list(Format))
async def test_export_then_verify_the_stream(
    nats_server: EmbeddedNats, jetstream_log: JetStreamLog, tmp_path: Path, fmt: Format
) -> None:
    stored = await append_seed(jetstream_log)
    out = tmp_path / f"log.{fmt.value}"
    done = await export(settings_for(nats_server, jetstream_log), out, fmt)
    assert (done.messages, done.first_seq, done.last_seq) == (len(stored), 1, stored[-1].seq)
    assert list(read_log(out)) == stored  # seqs, subjects and events exactly as stored
    report = verify(read_log(out))
    assert report.ok and report.decision_messages == 6 and not report.ignored


async def test_a_range_exports_only_that_range(
    nats_server: EmbeddedNats, jetstream_log: JetStreamLog, tmp_path: Path
) -> None:
    stored = await append_seed(jetstream_log)
    out = tmp_path / "part.jsonl"
    done = await export(settings_for(nats_server, jetstream_log), out, from_seq=5, to_seq=9)
    assert [e.seq for e in read_log(out)] == [e.seq for e in stored[4:9]]
    assert (done.first_seq, done.last_seq) == (5, 9)


async def test_verify_reads_the_live_stream_and_catches_a_forged_dispatch(
    nats_server: EmbeddedNats, jetstream_log: JetStreamLog
) -> None:
    await append_seed(jetstream_log)
    # A writer on the decision subject (a compromised scheduler) hands QS3's held-back unit out.
    forged = ev.JobDispatched(at=1000.005, job_id="med", attempt=2, hosts=("h3",))
    subject = subjects.decisions("q", jetstream_log.prefix)
    seq = await jetstream_log.append(subject, encode_batch([forged]))
    async with open_log(settings_for(nats_server, jetstream_log)) as event_log:
        envelopes = [e async for e in read_range(event_log)]
    report = verify(envelopes)
    assert [d.seq for d in report.differences] == [seq]
    assert report.differences[0].recorded == forged and report.differences[0].rederived is None


async def test_qm_log_export_and_qm_audit_verify(
    nats_server: EmbeddedNats,
    jetstream_log: JetStreamLog,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await append_seed(jetstream_log)
    bus = [
        "--nats-url",
        nats_server.url,
        "--stream",
        jetstream_log.stream,
        "--subject-prefix",
        jetstream_log.prefix,
    ]
    out = tmp_path / "log.qmlog"
    # `qm` runs its own event loop: off this test's loop, like a user's shell.
    status = await asyncio.to_thread(
        main, ["log", "export", "--out", str(out), "--format", "msgpack", *bus]
    )
    assert status == 0 and out.exists()
    assert await asyncio.to_thread(main, ["audit", "verify", "--from-file", str(out)]) == 0
    assert await asyncio.to_thread(main, ["audit", "verify", *bus]) == 0  # straight from the stream
    printed = capsys.readouterr().out
    assert "exported 19 messages" in printed and printed.count("OK: every recorded decision") == 2


async def test_a_missing_stream_is_a_clear_error(
    nats_server: EmbeddedNats, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["log", "export", "--out", str(tmp_path / "x"), "--nats-url", nats_server.url]
    status = await asyncio.to_thread(main, [*argv, "--stream", "NO_SUCH_STREAM"])
    assert status == 2
    assert "NO_SUCH_STREAM" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


async def test_the_auditor_nats_user_exports_a_secured_log(
    secured_bus: SecuredBus, tmp_path: Path
) -> None:
    """On a bus with one user per role, the auditor's user reads the whole log (and only reads)."""
    admin = await secured_bus.connect(SecuredBus.ADMIN)
    try:
        stored = await append_seed(admin)
    finally:
        await admin.close()
    who = secured_bus.credentials(AUDITOR)
    settings = AuditSettings(
        nats_url=secured_bus.url,
        stream=secured_bus.layout.stream,
        subject_prefix=secured_bus.layout.subject_prefix,
        nats_user=who.user,
        nats_password=who.password,
    )
    out = tmp_path / "audited.jsonl"
    done = await export(settings, out)
    assert done.messages == len(stored)
    assert verify(read_log(out)).ok


async def test_credentials_the_bus_refuses_are_one_line_at_once(
    secured_bus: SecuredBus,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A wrong password is not retried until the deadline: the server will not change its mind."""
    monkeypatch.setenv("QM_AUDIT_NATS_USER", AUDITOR)
    monkeypatch.setenv("QM_AUDIT_NATS_PASSWORD", "wrong")
    argv = ["log", "export", "--out", str(tmp_path / "x"), "--nats-url", secured_bus.url]
    started = time.monotonic()
    status = await asyncio.to_thread(main, argv)
    took = time.monotonic() - started
    [line] = capsys.readouterr().err.splitlines()
    assert status == 1
    assert line.startswith(f"qm: error: the bus at {secured_bus.url} as {AUDITOR}")
    assert "refused the user" in line
    print(f"\nrefused credentials: exit 1 after {took:.2f}s")
