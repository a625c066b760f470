"""How a `qm` command finds a stack and reaches its bus: the one home for both.

`qm up` writes `<data-dir>/stack.json` while it runs (and removes it when it stops):
admission's gRPC address, the NATS URL(s), the
stream and subject prefix, and where the read-only auditor NATS user's password,
CA and client certificate are (paths relative to the data dir; the password stays in
its 0600 file). Every command that reads the bus (`qm log export`, `qm audit
verify|state`, `qm usage`) takes `--data-dir` and reads it, so beside a running
`qm up` it needs no other setting; `qm explain` and `qm top` take `--data-dir` for
admission's address and credentials.

Each setting comes from the first of: a flag (`--nats-url`, `--stream`,
`--subject-prefix`), a `QM_AUDIT_*` variable, the data dir's `stack.json`, the
default. A NATS URL given by flag or variable names another bus, so the data dir is
then read only where `--data-dir` is given too: a stack's auditor password is never
sent to a server it does not belong to.

`qm log import` writes every subject family, so it logs in as the stack's admin user
(`stack.json`'s `admin`, or `QM_BOOTSTRAP_*`: the bootstrap's settings) instead.

Opening the log is bounded (`audit.stream.open_log`): nothing answering is one line
naming the URL(s) and user tried, and exit status 1, within its deadline (5 s).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from quartermaster.client.credentials import DEFAULT_DATA_DIR
from quartermaster.files import write_whole

if TYPE_CHECKING:  # the bus extra (nats-py) is imported only where a command reads the bus
    from quartermaster.audit.settings import AuditSettings
    from quartermaster.bus import JetStreamLog

STACK_FILE = "stack.json"
AUDITOR_ENV_PREFIX = "QM_AUDIT_"  # audit.settings.ENV_PREFIX (not imported: needs no bus extra)
ADMIN_ENV_PREFIX = "QM_BOOTSTRAP_"  # eventlog.bootstrap's settings: the admin user's


class AuditorAccess(msgspec.Struct, frozen=True, kw_only=True):
    """A NATS user of a stack (the read-only auditor, or the admin); paths relative to
    its data dir."""

    user: str = ""  # "": the bus has no users (`qm up --insecure`)
    password_file: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""


class StackFile(msgspec.Struct, frozen=True, kw_only=True):
    """`<data-dir>/stack.json`: where a running `qm up` is."""

    grpc_address: str
    nats_url: str  # one URL or a comma-separated list (a cluster's nodes)
    stream: str = "QM"
    subject_prefix: str = "qm"
    auditor: AuditorAccess = AuditorAccess()
    admin: AuditorAccess = AuditorAccess()  # `qm log import` only: it writes every family
    aws_url: str = ""  # the AWS-compatible endpoint ("": not served)
    # The object store accepts the endpoint's access keys too (qm up's embedded one does;
    # an external store knows only its own keys).
    store_takes_api_keys: bool = False


def data_dir_of(given: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """`--data-dir`, else `$QM_DATA_DIR`, else `./.qm-data` (as the client finds it)."""
    env = os.environ if environ is None else environ
    return Path(given or env.get("QM_DATA_DIR") or DEFAULT_DATA_DIR)


def write_stack_file(data_dir: Path, stack: StackFile) -> Path:
    """Write `stack.json` whole (a reader never sees half of it)."""
    path = Path(data_dir) / STACK_FILE
    write_whole(path, msgspec.json.format(msgspec.json.encode(stack)) + b"\n", mode=0o644)
    return path


def read_stack_file(data_dir: Path) -> StackFile | None:
    """The data dir's `stack.json`; None where there is none (no `qm up` ran there)."""
    try:
        return msgspec.json.decode((data_dir / STACK_FILE).read_bytes(), type=StackFile)
    except FileNotFoundError:
        return None
    except msgspec.ValidationError as err:
        raise OSError(f"{data_dir / STACK_FILE} is not a stack file: {err}") from err


def _stack_settings(data_dir: Path, stack: StackFile, *, admin: bool) -> dict[str, str]:
    """AuditSettings fields from a stack file (the password read from its file)."""
    who = stack.admin if admin else stack.auditor

    def at(relative: str) -> str:
        return str(data_dir / relative) if relative else ""

    fields = {"nats_url": stack.nats_url, "stream": stack.stream}
    fields |= {"subject_prefix": stack.subject_prefix, "nats_user": who.user}
    if who.password_file:
        fields["nats_password"] = (data_dir / who.password_file).read_text().strip()
    fields |= {"nats_tls_ca": at(who.tls_ca), "nats_tls_cert": at(who.tls_cert)}
    fields["nats_tls_key"] = at(who.tls_key)
    return fields


class BusTarget(NamedTuple):
    """What a command will try: the settings and where they came from (for messages)."""

    settings: AuditSettings
    source: str  # "settings from .qm-data/stack.json, flags", "settings from defaults; no ..."


def bus_target(
    a: argparse.Namespace, environ: Mapping[str, str] | None = None, *, admin: bool = False
) -> BusTarget:
    """The bus settings of a command: flags, then `QM_AUDIT_*`, then the data dir.

    `admin`: as the stack's admin user instead of the auditor, with `QM_BOOTSTRAP_*` (the
    bootstrap's settings, the admin's everywhere) in place of `QM_AUDIT_*`."""
    from quartermaster.audit.settings import AuditSettings
    from quartermaster.envsettings import from_env

    env = os.environ if environ is None else environ
    env_prefix = ADMIN_ENV_PREFIX if admin else AUDITOR_ENV_PREFIX
    fields: dict[str, Any] = {}
    sources = []
    named_elsewhere = a.nats_url is not None or f"{env_prefix}NATS_URL" in env
    missing = ""
    if a.data_dir is not None or not named_elsewhere:
        data_dir = data_dir_of(a.data_dir, env)
        stack = read_stack_file(data_dir)
        if stack is not None:
            fields |= _stack_settings(data_dir, stack, admin=admin)
            sources.append(f"{data_dir / STACK_FILE}")
        else:
            missing = f"; no {data_dir / STACK_FILE}: is `qm up` running there?"
    in_env = from_env(AuditSettings, env_prefix, env)
    names = [field.name for field in msgspec.structs.fields(AuditSettings)]
    set_in_env = {n: getattr(in_env, n) for n in names if f"{env_prefix}{n.upper()}" in env}
    if set_in_env:
        fields |= set_in_env
        sources.append(f"{env_prefix}*")
    flags = {
        k: v
        for k, v in (
            ("nats_url", a.nats_url),
            ("stream", a.stream),
            ("subject_prefix", a.subject_prefix),
        )
        if v is not None
    }
    if flags:
        fields |= flags
        sources.append("flags")
    source = "settings from " + (", ".join(sources) or "defaults") + missing
    return BusTarget(msgspec.convert(fields, AuditSettings), source)


@contextlib.asynccontextmanager
async def open_bus(a: argparse.Namespace) -> AsyncIterator[JetStreamLog]:
    """The log of the stack `a` names, opened as an auditor within the deadline."""
    from quartermaster.audit.stream import open_log

    target = bus_target(a)
    async with open_log(target.settings, source=target.source) as event_log:
        yield event_log


def add_bus_flags(p: argparse.ArgumentParser) -> None:
    """`--data-dir`, `--nats-url`, `--stream`, `--subject-prefix` of a command reading the bus."""
    add_data_dir(p, "where `qm up` wrote stack.json (the bus and the auditor's access)")
    p.add_argument(
        "--nats-url",
        default=None,
        help="NATS server(s), comma-separated (default: $QM_AUDIT_NATS_URL, else the data dir's)",
    )
    p.add_argument("--stream", default=None, help="JetStream stream (default: QM)")
    p.add_argument("--subject-prefix", default=None, help="subject prefix (default: qm)")


def add_data_dir(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--data-dir",
        default=None,
        metavar="DIR",
        help=f"{what} (default: $QM_DATA_DIR, else ./{DEFAULT_DATA_DIR})",
    )


def admission_of(
    a: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> tuple[str, str | None]:
    """(address, credentials dir) for a gRPC command with `--data-dir`: `--address` or
    `$QM_ADDRESS` first, else the data dir's stack.json; `--credentials` first, else
    `<data-dir>/credentials` where `--data-dir` is given (else the client's own search)."""
    from quartermaster.client.connection import DEFAULT_ADDRESS

    env = os.environ if environ is None else environ
    address = a.address
    if address == DEFAULT_ADDRESS and "QM_ADDRESS" not in env:
        stack = read_stack_file(data_dir_of(a.data_dir, env))
        if stack is not None:
            address = stack.grpc_address
    credentials = a.credentials
    if credentials is None and a.data_dir is not None:
        credentials = str(Path(a.data_dir) / "credentials")
    return address, credentials
