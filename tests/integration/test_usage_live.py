"""`qm usage` straight from a real stream: the same series as from an exported file.

The seed scenario is appended to a real nats-server's stream; `qm usage` reads it
with the bus flags (plaintext) and as the read-only auditor NATS user (a bus with
one user per role), and prints the series the file of the same messages gives.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from audit_seed import append_seed

from quartermaster.audit import Envelope
from quartermaster.audit.usage import to_csv, usage_series
from quartermaster.bus import JetStreamLog
from quartermaster.cli.main import main
from quartermaster.embedded.nats_auth import Role, user_name
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.testing.servers import SecuredBus


def expected_csv(stored: list[Envelope]) -> str:
    return "\n".join(to_csv(usage_series(stored))) + "\n"


async def test_qm_usage_reads_the_live_stream(
    nats_server: EmbeddedNats,
    jetstream_log: JetStreamLog,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stored = await append_seed(jetstream_log)
    bus = ["--nats-url", nats_server.url, "--stream", jetstream_log.stream]
    bus += ["--subject-prefix", jetstream_log.prefix]
    capsys.readouterr()
    # `qm` runs its own event loop: off this test's loop, like a user's shell.
    assert await asyncio.to_thread(main, ["usage", "--format", "csv", *bus]) == 0
    printed = capsys.readouterr().out
    assert printed == expected_csv(stored)
    assert ",q,QS1,ml.g5.xlarge,2,1,1" in printed  # QS1 borrows QS2's unit
    out = tmp_path / "usage.png"
    assert await asyncio.to_thread(main, ["usage", "--out", str(out), *bus]) == 0
    assert "2 preemptions" in capsys.readouterr().out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_the_auditor_nats_user_draws_the_usage_of_a_secured_bus(
    secured_bus: SecuredBus, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = await secured_bus.connect(SecuredBus.ADMIN)
    try:
        stored = await append_seed(admin)
    finally:
        await admin.close()
    who = secured_bus.credentials(user_name(Role.AUDITOR))
    monkeypatch.setenv("QM_AUDIT_NATS_URL", secured_bus.url)
    monkeypatch.setenv("QM_AUDIT_STREAM", secured_bus.layout.stream)
    monkeypatch.setenv("QM_AUDIT_SUBJECT_PREFIX", secured_bus.layout.subject_prefix)
    monkeypatch.setenv("QM_AUDIT_NATS_USER", who.user)
    monkeypatch.setenv("QM_AUDIT_NATS_PASSWORD", who.password)
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["usage", "--format", "csv"]) == 0
    assert capsys.readouterr().out == expected_csv(stored)
