"""What a multi-host deployment needs to be secured as `qm up` is, made once and kept.

`qm deploy bootstrap --out DIR` makes whatever is missing under `DIR/credentials/`
(the only copy of the CA key, the token-signing key, every NATS password) with the
same generators `qm up` uses (`auth.local`, `embedded.nats_credentials`,
`embedded.nats_auth`), then writes one directory per part, each holding only what
that part reads, so a deployment mounts each into its own containers:

    credentials/  the master copy (LocalCredentials files, <user>.password, nats-*.pem,
                  aws-keys.json and aws-keys.seal: the AWS access keys, an admin's first)
    nats/         nats-auth.conf (users and permissions, client TLS), nats-cluster.conf
                  (route TLS, route password, routes), server.pem, server-key.pem, ca.pem
    admission/    server.pem, server-key.pem (gRPC and AWS endpoint TLS), token-verify.pem,
                  page-token.key, aws-keys.json, aws-keys.seal (SigV4's keys, sealed),
                  and, like every service: ca.pem, nats-client.pem, nats-client-key.pem,
                  nats.user, nats.password
    scheduler/, warmpool/   ca.pem, nats-client*.pem, nats.user, nats.password
    nodes/        ca.pem, nats-client*.pem, and <host>.user, <host>.password per host

Reruns keep every key, certificate and password that exists and rewrite the part
directories from it (the same bytes), so it is safe to run at every start. The
permission table is `embedded.nats_auth`'s, the one `qm up` renders.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from pathlib import Path

import msgspec

from quartermaster.auth.access_keys import KEYS_FILE, SEAL_FILE, AccessKeyFile
from quartermaster.auth.local import LocalCredentials
from quartermaster.bus.access import NatsCredentials
from quartermaster.embedded.nats_auth import (
    SERVICE_ROLES,
    BusLayout,
    Role,
    TlsFiles,
    server_config,
    service_users,
    user_name,
)
from quartermaster.embedded.nats_credentials import NatsPasswords
from quartermaster.files import write_whole

CREDENTIALS = "credentials"
NATS = "nats"
NODES = "nodes"
PARTS = (CREDENTIALS, NATS, *(role.value for role in SERVICE_ROLES), NODES)
ROUTE_USER = "route"  # the NATS servers' own user on the cluster port (not a client user)
CLIENT_CERT = "nats-client.pem"
CLIENT_KEY = "nats-client-key.pem"
_HOST = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


class DeployPlan(msgspec.Struct, frozen=True, kw_only=True):
    """The names a deployment's certificates and NATS config are made for."""

    hosts: tuple[str, ...]  # node agents' host ids: one NATS user each
    admission_names: tuple[str, ...] = ("localhost", "127.0.0.1")  # in admission's cert
    nats_names: tuple[str, ...] = ("localhost", "127.0.0.1")  # in the NATS servers' cert
    routes: tuple[str, ...] = ()  # nats://HOST:PORT of every server's cluster port
    nats_dir: str = "/etc/nats-secrets"  # where the NATS servers mount part `nats`
    layout: BusLayout = BusLayout()


def ensure(out: Path, plan: DeployPlan, now: dt.datetime) -> Path:
    """Make what is missing under `out/credentials`, then (re)write every part; `out`."""
    for host in plan.hosts:
        if not _HOST.fullmatch(host):
            raise ValueError(f"not a host id (letters, digits, '.', '_', '-'): {host!r}")
    creds = LocalCredentials.ensure(out / CREDENTIALS, now, server_names=plan.admission_names)
    access_keys = AccessKeyFile(creds.directory)  # the AWS endpoint's keys: `qm keys` adds more
    access_keys.ensure_admin_key(now=now.timestamp())
    passwords = NatsPasswords(creds.directory)
    users = service_users(passwords.password, plan.hosts)
    roles = [Role.ADMIN, Role.AUDITOR, *SERVICE_ROLES, Role.NODE]
    certs = {role: creds.service_cert(f"nats-{role.value}", now) for role in roles}
    server_cert, server_key = creds.service_cert("nats-server", now, plan.nats_names)
    ca = creds.ca.read_bytes()

    def client(role: Role) -> dict[str, bytes]:
        cert, key = certs[role]
        return {"ca.pem": ca, CLIENT_CERT: cert.read_bytes(), CLIENT_KEY: key.read_bytes()}

    tls = TlsFiles(
        cert_file=f"{plan.nats_dir}/server.pem",
        key_file=f"{plan.nats_dir}/server-key.pem",
        ca_file=f"{plan.nats_dir}/ca.pem",
        verify=True,  # mutual TLS, as `qm up`: every client shows a certificate of the CA
    )
    clients = server_config(users, plan.layout, tls=tls)
    route_password = passwords.password(ROUTE_USER)
    cluster = {  # routes: the same TLS, and a user only the servers know
        "authorization": {"user": ROUTE_USER, "password": route_password},
        "tls": clients["tls"],
        "routes": [_with_user(route, route_password) for route in plan.routes],
    }
    _write_part(
        out / NATS,
        {
            "nats-auth.conf": _conf(clients).encode(),
            "nats-cluster.conf": _conf(cluster).encode(),
            "ca.pem": ca,
            "server.pem": server_cert.read_bytes(),
            "server-key.pem": server_key.read_bytes(),
        },
    )
    for role in SERVICE_ROLES:
        files = {**client(role), **_login(passwords, user_name(role))}
        if role is Role.ADMISSION:
            files |= {
                "server.pem": creds.server_cert.read_bytes(),
                "server-key.pem": creds.server_key.read_bytes(),
                "token-verify.pem": creds.verify_key.read_bytes(),
                "page-token.key": creds.page_token_key.read_bytes(),
                KEYS_FILE: access_keys.path.read_bytes(),
                SEAL_FILE: access_keys.seal_path.read_bytes(),
            }
        _write_part(out / role.value, files)
    nodes = client(Role.NODE)
    for host in plan.hosts:
        login = _login(passwords, user_name(Role.NODE, host))
        nodes |= {f"{host}.{name.removeprefix('nats.')}": data for name, data in login.items()}
    _write_part(out / NODES, nodes)
    return out


def admin_credentials(out: Path) -> NatsCredentials:
    """The admin NATS user of a bootstrapped `out` (the bootstrap's own connection)."""
    directory = out / CREDENTIALS
    return msgspec.structs.replace(
        NatsPasswords(directory).credentials(user_name(Role.ADMIN)),
        tls_ca=str(directory / "ca.pem"),
        tls_cert=str(directory / "nats-admin.pem"),
        tls_key=str(directory / "nats-admin-key.pem"),
    )


def part_files(out: Path, part: str) -> dict[str, bytes]:
    """A part directory's files by name (what a Kubernetes Secret of it holds)."""
    directory = out / part
    if not directory.is_dir():
        return {}
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def put_files(out: Path, part: str, files: Mapping[str, bytes]) -> None:
    """Write a part's files as `part_files` read them (a Secret back into a directory)."""
    _write_part(out / part, files)


def _login(passwords: NatsPasswords, user: str) -> dict[str, bytes]:
    return {"nats.user": user.encode(), "nats.password": passwords.password(user).encode()}


def _with_user(route: str, password: str) -> str:
    scheme, sep, rest = route.partition("://")
    if not sep:
        raise ValueError(f"not a route URL (nats://HOST:PORT): {route!r}")
    return f"{scheme}://{ROUTE_USER}:{password}@{rest}"


def _conf(blocks: Mapping[str, object]) -> str:
    """nats-server config text: one `key: <JSON>` line per block (the format reads JSON)."""
    return "".join(f"{key}: {json.dumps(value)}\n" for key, value in blocks.items())


def _write_part(directory: Path, files: Mapping[str, bytes]) -> None:
    """Each file mode 0600 (its owner is the uid every service runs as), replaced whole
    and only when its bytes change."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, data in files.items():
        path = directory / name
        if path.is_file() and path.read_bytes() == data:
            continue
        write_whole(path, data)
