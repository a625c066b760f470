"""Where a bus command's settings come from: flags, then QM_AUDIT_*, then the data dir."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from quartermaster.cli.bus import (
    AuditorAccess,
    StackFile,
    add_bus_flags,
    admission_of,
    bus_target,
    write_stack_file,
)
from quartermaster.client.connection import DEFAULT_ADDRESS

STACK_URL = "tls://127.0.0.1:4333"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data dir as `qm up` leaves it: stack.json, the auditor's password and certs."""
    nats = tmp_path / "credentials" / "nats"
    nats.mkdir(parents=True)
    (nats / "auditor.password").write_text("s3cret\n")
    write_stack_file(
        tmp_path,
        StackFile(
            grpc_address="127.0.0.1:50999",
            nats_url=STACK_URL,
            stream="S",
            subject_prefix="p",
            auditor=AuditorAccess(
                user="auditor",
                password_file="credentials/nats/auditor.password",
                tls_ca="credentials/ca.pem",
                tls_cert="credentials/nats-auditor.pem",
                tls_key="credentials/nats-auditor-key.pem",
            ),
        ),
    )
    return tmp_path


def args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_bus_flags(p)
    return p.parse_args(argv)


def test_the_data_dir_gives_the_url_the_auditor_and_its_files(data_dir: Path) -> None:
    target = bus_target(args("--data-dir", str(data_dir)), {})
    s = target.settings
    assert (s.nats_url, s.stream, s.subject_prefix) == (STACK_URL, "S", "p")
    assert (s.nats_user, s.nats_password) == ("auditor", "s3cret")
    assert s.nats_tls_ca == str(data_dir / "credentials/ca.pem")
    assert s.nats_tls_key == str(data_dir / "credentials/nats-auditor-key.pem")
    assert str(data_dir / "stack.json") in target.source


def test_qm_data_dir_and_then_the_default_are_looked_in(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bus_target(args(), {"QM_DATA_DIR": str(data_dir)}).settings.nats_url == STACK_URL
    monkeypatch.chdir(tmp_path / "credentials")  # no .qm-data here
    target = bus_target(args(), {})
    assert target.settings.nats_url == "nats://127.0.0.1:4222"
    assert "no .qm-data/stack.json" in target.source


def test_variables_and_flags_override_the_data_dir(data_dir: Path) -> None:
    env = {"QM_DATA_DIR": str(data_dir), "QM_AUDIT_STREAM": "FROM_ENV"}
    s = bus_target(args("--data-dir", str(data_dir), "--subject-prefix", "f"), env).settings
    assert (s.nats_url, s.stream, s.subject_prefix, s.nats_user) == (
        STACK_URL,
        "FROM_ENV",
        "f",
        "auditor",
    )


def test_a_url_named_elsewhere_gets_no_stack_password_unless_the_data_dir_is_named(
    data_dir: Path,
) -> None:
    env = {"QM_DATA_DIR": str(data_dir)}
    other = bus_target(args("--nats-url", "nats://elsewhere:4222"), env).settings
    assert (other.nats_url, other.nats_user, other.nats_password) == (
        "nats://elsewhere:4222",
        "",
        "",
    )
    env_url = {**env, "QM_AUDIT_NATS_URL": "nats://elsewhere:4222"}
    assert bus_target(args(), env_url).settings.nats_password == ""
    named = bus_target(args("--data-dir", str(data_dir)), env_url).settings
    assert (named.nats_url, named.nats_password) == ("nats://elsewhere:4222", "s3cret")


def test_admission_is_found_in_the_data_dir_unless_named(data_dir: Path) -> None:
    a = argparse.Namespace(address=DEFAULT_ADDRESS, credentials=None, data_dir=str(data_dir))
    assert admission_of(a, {}) == ("127.0.0.1:50999", str(data_dir / "credentials"))
    assert admission_of(a, {"QM_ADDRESS": DEFAULT_ADDRESS})[0] == DEFAULT_ADDRESS
    named = argparse.Namespace(address="10.0.0.1:1", credentials="/c", data_dir=str(data_dir))
    assert admission_of(named, {}) == ("10.0.0.1:1", "/c")
