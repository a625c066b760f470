"""The NATS permission table and the server config rendered from it (pure; no server)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from quartermaster.embedded.nats_auth import (
    BusLayout,
    Role,
    TlsFiles,
    permissions,
    render_config,
    service_users,
    user_name,
)
from quartermaster.embedded.nats_credentials import NatsPasswords

LAYOUT = BusLayout(stream="QM", subject_prefix="qm")
FAMILIES = {"qm.requests", "qm.decisions.*", "qm.timers", "qm.reports.h1", "qm.reports.h2"}


def log_subjects(role: Role, host: str | None = None) -> set[str]:
    allowed = permissions(role, LAYOUT, host)
    assert allowed is not None
    return {s for s in allowed.publish if s.startswith("qm.")}


def test_each_role_publishes_only_its_own_family() -> None:
    assert log_subjects(Role.ADMISSION) == {"qm.requests"}
    assert log_subjects(Role.SCHEDULER) == {"qm.decisions.*"}
    assert log_subjects(Role.WARMPOOL) == {"qm.timers"}
    assert log_subjects(Role.NODE, "h1") == {"qm.reports.h1"}
    assert log_subjects(Role.AUDITOR) == set()
    assert permissions(Role.ADMIN, LAYOUT) is None  # no restriction


def test_no_service_may_manage_the_stream_or_write_through_wildcards() -> None:
    for role, host in [(r, None) for r in Role if r not in (Role.ADMIN, Role.NODE)] + [
        (Role.NODE, "h1")
    ]:
        allowed = permissions(role, LAYOUT, host)
        assert allowed is not None
        for subject in allowed.publish:
            assert subject not in (">", "qm.>", "$JS.>", "$JS.API.>"), (role, subject)
            assert ".UPDATE." not in subject, (role, subject)
        on_the_stream = {
            s for s in allowed.publish if s.startswith("$JS.API.STREAM.") and s.endswith(".QM")
        }
        # A node agent reads no message of the log (its host's views come from the feed).
        expected = {"$JS.API.STREAM.INFO.QM"}
        if role is not Role.NODE:
            expected.add("$JS.API.STREAM.MSG.GET.QM")
        assert on_the_stream == expected, role
        inbox = f"_INBOX_{user_name(role, host).replace('.', '_')}.>"
        # Besides its inbox, a node agent hears log requests for its own host only, and
        # its own host's views sent at once (unstored).
        own = ("qm_logs.h1", "qm_hosts.h1.now") if role is Role.NODE else ()
        assert allowed.subscribe == (inbox, *own)
        assert allowed.allow_responses is (role is Role.NODE)


def test_only_admission_may_ask_for_job_logs() -> None:
    for role, host in [(r, None) for r in Role if r not in (Role.ADMIN, Role.NODE)] + [
        (Role.NODE, "h1")
    ]:
        allowed = permissions(role, LAYOUT, host)
        assert allowed is not None
        asks = [s for s in allowed.publish if s.startswith("qm_logs.")]
        assert asks == (["qm_logs.*"] if role is Role.ADMISSION else []), role


def test_the_config_holds_every_user_with_its_permissions(tmp_path: Path) -> None:
    passwords = NatsPasswords(tmp_path / "nats")
    users = service_users(passwords.password, ["h1", "h2"])
    tls = TlsFiles(cert_file="/c.pem", key_file="/k.pem", ca_file="/ca.pem", verify=True)
    config = json.loads(render_config(users, LAYOUT, tls=tls))
    rendered = {u["user"]: u for u in config["authorization"]["users"]}
    assert set(rendered) == {
        "admin",
        "auditor",
        "admission",
        "scheduler",
        "warmpool",
        "node.h1",
        "node.h2",
    }
    assert "permissions" not in rendered["admin"]
    node = rendered[user_name(Role.NODE, "h2")]
    assert "qm.reports.h2" in node["permissions"]["publish"]["allow"]
    assert not FAMILIES - {"qm.reports.h2"} & set(node["permissions"]["publish"]["allow"])
    assert config["tls"] == {
        "cert_file": "/c.pem",
        "key_file": "/k.pem",
        "ca_file": "/ca.pem",
        "verify": True,
        "timeout": 5.0,
    }
    assert len({u["password"] for u in rendered.values()}) == len(rendered)


def test_passwords_are_random_kept_and_private(tmp_path: Path) -> None:
    directory = tmp_path / "credentials" / "nats"
    first = NatsPasswords(directory).password("scheduler")
    assert NatsPasswords(directory).password("scheduler") == first  # kept across restarts
    assert NatsPasswords(tmp_path / "other").password("scheduler") != first
    assert len(first) >= 40
    path = directory / "scheduler.password"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    config = NatsPasswords(directory).write_server_config("{}\n")
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600


def test_a_node_agent_reads_only_its_own_hosts_views() -> None:
    allowed = permissions(Role.NODE, LAYOUT, "h1")
    assert allowed is not None
    creates = {s for s in allowed.publish if ".CONSUMER.CREATE." in s}
    assert creates == {"$JS.API.CONSUMER.CREATE.QM_HOSTS.*.qm_hosts.h1.cmd"}
    assert not any(s.startswith("$JS.API.DIRECT.GET") for s in allowed.publish)
    assert not any(s.startswith("qm_hosts.") for s in allowed.publish)  # writes no view
    scheduler = permissions(Role.SCHEDULER, LAYOUT)
    assert scheduler is not None and "qm_hosts.*.cmd" in scheduler.publish
    assert "qm_hosts.*.now" in scheduler.publish  # each view also at once, unstored
