"""`qm deploy bootstrap` without Docker: what it writes, that reruns keep it, that the NATS
users carry `qm up`'s permission table, and the Kubernetes Secrets round trip through a
small fake API server."""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from quartermaster.auth import Role as ApiRole  # a principal's (nats_auth's Role is the bus's)
from quartermaster.auth.access_keys import ADMIN_SUBJECT, AccessKeyFile, KeyRing
from quartermaster.deploy.command import main
from quartermaster.deploy.kube import SecretsApi, secret_name
from quartermaster.deploy.secrets import PARTS, DeployPlan, ensure, part_files
from quartermaster.embedded.nats_auth import BusLayout, Role, permissions, user_name
from quartermaster.envsettings import SettingsError, from_env

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
PLAN = DeployPlan(hosts=("gpu-1", "gpu-2.example"), routes=("nats://10.0.0.1:6222",))


def everything(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def conf_blocks(text: str) -> dict[str, Any]:
    """The `key: <JSON>` lines the bootstrap renders."""
    return {
        key: json.loads(value) for key, value in (line.split(": ", 1) for line in text.splitlines())
    }


def test_a_rerun_keeps_every_key_certificate_and_password(tmp_path: Path) -> None:
    ensure(tmp_path, PLAN, NOW)
    first = everything(tmp_path)
    ensure(tmp_path, PLAN, NOW + dt.timedelta(days=1))
    assert everything(tmp_path) == first
    # What the parts hold is their owner's only (the services' uid); in credentials, the
    # private keys and passwords (its certificates are public).
    private = [n for n in first if not n.startswith("credentials/") or not n.endswith(".pem")]
    private += [n for n in first if n.endswith("-key.pem") or n.endswith("signing.pem")]
    assert all((tmp_path / name).stat().st_mode & 0o077 == 0 for name in private)


def test_each_part_gets_only_its_own_files(tmp_path: Path) -> None:
    ensure(tmp_path, PLAN, NOW)
    assert {p.name for p in tmp_path.iterdir()} == set(PARTS)
    signing = "token-signing.pem"
    assert [part for part in PARTS if signing in part_files(tmp_path, part)] == ["credentials"]
    assert [part for part in PARTS if "ca-key.pem" in part_files(tmp_path, part)] == ["credentials"]
    scheduler = part_files(tmp_path, "scheduler")
    assert scheduler["nats.user"] == b"scheduler"
    assert scheduler["nats.password"] != part_files(tmp_path, "warmpool")["nats.password"]
    nodes = part_files(tmp_path, "nodes")
    assert nodes["gpu-2.example.user"] == user_name(Role.NODE, "gpu-2.example").encode()
    assert "page-token.key" in part_files(tmp_path, "admission")


def test_admission_verifies_sigv4_with_the_admin_access_key_of_the_credentials(
    tmp_path: Path,
) -> None:
    """One admin access key, kept in credentials (where `qm keys issue --data-dir OUT`
    writes) and copied into part admission, whose key ring opens it with the same secret."""
    ensure(tmp_path, PLAN, NOW)
    keys = AccessKeyFile(tmp_path / "credentials")
    (admin,) = keys.records()
    assert (admin.subject, admin.roles) == (ADMIN_SUBJECT, (ApiRole.ADMIN,))
    assert [p for p in PARTS if "aws-keys.seal" in part_files(tmp_path, p)] == [
        "credentials",
        "admission",
    ]
    found = KeyRing(tmp_path / "admission").lookup(admin.access_key_id)
    assert found is not None
    secret, principal = found
    assert secret == keys.secret_of(admin).encode()
    assert principal.roles == {ApiRole.ADMIN}
    # A key issued later reaches admission with the next run; the admin key stays the same.
    auditor, _ = keys.add("alice", [ApiRole.AUDITOR], now=NOW.timestamp())
    ensure(tmp_path, PLAN, NOW)
    assert KeyRing(tmp_path / "admission").lookup(auditor.access_key_id) is not None
    assert AccessKeyFile(tmp_path / "admission").records() == [admin, auditor]


def test_nats_users_have_the_permissions_qm_up_renders(tmp_path: Path) -> None:
    ensure(tmp_path, PLAN, NOW)
    nats = part_files(tmp_path, "nats")
    blocks = conf_blocks(nats["nats-auth.conf"].decode())
    users = {u["user"]: u for u in blocks["authorization"]["users"]}
    wanted: list[tuple[Role, str | None]] = [(Role.ADMISSION, None), (Role.SCHEDULER, None)]
    wanted += [(Role.WARMPOOL, None)]
    wanted += [(Role.AUDITOR, None), *((Role.NODE, host) for host in PLAN.hosts)]
    for role, host in wanted:
        allowed = permissions(role, BusLayout(), host)
        assert allowed is not None
        entry = users[user_name(role, host)]
        assert entry["permissions"]["publish"]["allow"] == list(allowed.publish)
        assert entry["permissions"]["subscribe"]["allow"] == list(allowed.subscribe)
    assert "permissions" not in users["admin"]
    assert blocks["tls"]["verify"] is True  # mutual TLS, as qm up
    cluster = conf_blocks(nats["nats-cluster.conf"].decode())
    password = cluster["authorization"]["password"]
    assert cluster["routes"] == [f"nats://route:{password}@10.0.0.1:6222"]
    assert cluster["tls"] == blocks["tls"]
    assert password not in {u["password"] for u in users.values()}


def test_a_host_id_that_is_not_a_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="host id"):
        ensure(tmp_path, DeployPlan(hosts=("../etc",)), NOW)


def test_settings_read_a_text_field_from_the_file_its_file_variable_names(tmp_path: Path) -> None:
    from quartermaster.bus.access import BusSettings

    (tmp_path / "pw").write_text("s3cret\n")
    env = {"QM_X_NATS_PASSWORD_FILE": str(tmp_path / "pw"), "QM_X_NATS_USER": "scheduler"}
    settings = from_env(BusSettings, "QM_X_", env)
    assert (settings.nats_user, settings.nats_password) == ("scheduler", "s3cret")
    with pytest.raises(SettingsError, match="QM_X_NATS_USER_FILE"):
        from_env(BusSettings, "QM_X_", {"QM_X_NATS_USER_FILE": str(tmp_path / "missing")})


class FakeKubernetes(BaseHTTPRequestHandler):
    """Secrets of one namespace: GET, POST, PUT, as the API server answers them."""

    secrets: dict[str, dict[str, Any]] = {}

    def _reply(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def do_GET(self) -> None:
        assert self.headers["Authorization"] == "Bearer the-token"
        found = self.secrets.get(self._name())
        self._reply(200, found) if found else self._reply(404, {"reason": "NotFound"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body["metadata"]["resourceVersion"] = "1"
        self.secrets[body["metadata"]["name"]] = body
        self._reply(201, body)

    def do_PUT(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert (
            body["metadata"]["resourceVersion"]
            == self.secrets[self._name()]["metadata"]["resourceVersion"]
        )
        body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        self.secrets[self._name()] = body
        self._reply(200, body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def kubernetes() -> Iterator[str]:
    FakeKubernetes.secrets = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeKubernetes)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_k8s_job_keeps_the_credentials_secret_across_reruns(
    kubernetes: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run starts from an empty directory (a new pod): the CA and the admin token
    come back from Secret qm-bootstrap-credentials, so nothing is replaced."""
    token = tmp_path / "token"
    token.write_text("the-token\n")

    def in_cluster(namespace: str = "", api_url: str = "") -> SecretsApi:
        return SecretsApi(namespace=namespace, api_url=api_url, token_file=token, ca_file=None)

    monkeypatch.setattr(SecretsApi, "in_cluster", staticmethod(in_cluster))
    args = ["bootstrap", "--k8s-secrets", "--k8s-namespace", "qm", "--k8s-api", kubernetes]
    args += ["--host", "gpu-1"]
    assert main([*args, "--out", str(tmp_path / "run-1")]) == 0
    first = {name: dict(s["data"]) for name, s in FakeKubernetes.secrets.items()}
    assert set(first) == {secret_name(part) for part in PARTS}
    assert main([*args, "--out", str(tmp_path / "run-2")]) == 0
    assert {name: s["data"] for name, s in FakeKubernetes.secrets.items()} == first
    assert all(s["metadata"]["resourceVersion"] == "1" for s in FakeKubernetes.secrets.values())
    ca = base64.b64decode(first[secret_name("credentials")]["ca.pem"])
    assert (tmp_path / "run-2" / "admission" / "ca.pem").read_bytes() == ca
    # The AWS access keys too: the admin key the first run made is the one admission reads.
    for name in ("aws-keys.json", "aws-keys.seal"):
        assert first[secret_name("admission")][name] == first[secret_name("credentials")][name]
    assert AccessKeyFile(tmp_path / "run-2" / "admission").records() == (
        AccessKeyFile(tmp_path / "run-1" / "credentials").records()
    )
    # A new host: its user is added and only the Secrets that change are replaced.
    assert main([*args, "--host", "gpu-2", "--out", str(tmp_path / "run-3")]) == 0
    nodes = FakeKubernetes.secrets[secret_name("nodes")]
    assert {"gpu-1.password", "gpu-2.password"} <= set(nodes["data"])
    assert (
        FakeKubernetes.secrets[secret_name("scheduler")]["data"] == first["qm-bootstrap-scheduler"]
    )
