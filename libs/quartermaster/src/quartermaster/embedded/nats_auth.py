"""Who may write what on the bus: one NATS user per service role, as nats-server config.

Pure data and rendering (no I/O), so `qm up` and an operator's deploy configs share
one permission table. Every service role reads the whole log (ordered consumers on
the stream); node agent X reads only its host's views on the host feed
(`<p>_hosts.X.cmd`, `bus.feed`), which the scheduler writes. Each writes only its
own subject family:

- admission: `<p>.requests`; the scheduler: `<p>.decisions.*` plus its lease (KV)
  and snapshot (object store) buckets; the warm-pool service: `<p>.timers`;
  node agent X: `<p>.reports.X`; the auditor: nothing.
- Heartbeats live in a KV bucket, not the log (`bus.liveness`): node agent X may
  publish on its own key `$KV.<stream>_LIVENESS.X` only; the scheduler and
  admission read the bucket with an ordered consumer.
- Job logs travel by request/reply outside the stream (`bus.joblogs`): admission
  may publish requests to `<p>_logs.*`; node agent X may subscribe on
  `<p>_logs.X` only and answer what it receives (`allow_responses`: one reply
  per request, to the requester's inbox).
- Only `admin` (the bootstrap connection and operators) may create, update, purge
  or delete the stream: a service allowed `STREAM.UPDATE` could change the
  stream's subjects, and one allowed `STREAM.CREATE` could add a stream that
  republishes into another family.
- The JetStream API is granted per subject: stream info, ephemeral consumer
  create/info/delete and flow-control replies for ordered readers, message get for
  the append retry check. Publishes with expected-sequence headers and their acks
  need nothing more. Each user subscribes only to its own inboxes
  (`_INBOX_<user>.>`, `NatsCredentials.inbox_prefix`), so none reads another's
  replies or consumer deliveries. No service acks messages (ordered
  readers use `AckPolicy.NONE`), so no `$JS.ACK` is granted.

Known gap, server side (nats-io/nats-server#8274): creating a push consumer does
not check the creator's permission on its deliver subject. The server refuses a
deliver subject inside the consumer's own stream (a cycle), and the scheduler's
buckets do not store such deliveries (both checked by
`tests/integration/test_bus_permissions.py`), so no reader can write the log or
the buckets this way. The buckets are made by the bootstrap connection, so the
scheduler's create-or-bind cannot give them another configuration.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum

import msgspec

from quartermaster.bus.access import NatsCredentials
from quartermaster.bus.feed import (
    fast_subject,
    fast_subjects,
    feed_stream,
    feed_subject,
    feed_subjects,
)
from quartermaster.bus.joblogs import logs_subject, logs_subjects
from quartermaster.bus.liveness import beat_subject, liveness_stream
from quartermaster.core.provenance import token
from quartermaster.embedded.nats_server import MAX_PAYLOAD_BYTES


class Role(StrEnum):
    ADMIN = "admin"  # bootstrap and operators: streams, buckets, everything
    ADMISSION = "admission"
    SCHEDULER = "scheduler"
    WARMPOOL = "warmpool"
    NODE = "node"  # one user per host
    AUDITOR = "auditor"  # reads the log, writes nothing


SERVICE_ROLES = (Role.ADMISSION, Role.SCHEDULER, Role.WARMPOOL)


class BusLayout(msgspec.Struct, frozen=True, kw_only=True):
    """The names the permissions are written against (defaults as the services use)."""

    stream: str = "QM"
    subject_prefix: str = "qm"
    lease_bucket: str = "qm-leases"
    snapshot_bucket: str = "qm-snapshots"


class Permissions(msgspec.Struct, frozen=True, kw_only=True):
    """Subjects a user may publish to and subscribe on (allow lists; all else denied)."""

    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    allow_responses: bool = False  # may reply (once) to requests it received


class NatsUser(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    password: str
    role: Role
    host: str | None = None  # the host of a node agent's user


class TlsFiles(msgspec.Struct, frozen=True, kw_only=True):
    """The server's certificate and key; with `ca_file` and `verify`, mutual TLS."""

    cert_file: str
    key_file: str
    ca_file: str = ""
    verify: bool = False  # require and check client certificates (signed by ca_file)
    # The server drops a client whose TLS handshake takes longer (its default, 0.5 s, is
    # too short on a loaded host: clients were dropped mid-handshake and reconnected).
    handshake_timeout_s: float = 5.0


def user_name(role: Role, host: str | None = None) -> str:
    """`scheduler`, `node.<host>`: the NATS user of a role (of a host, for node agents)."""
    if role is Role.NODE:
        if not host:
            raise ValueError("a node agent's NATS user needs its host id")
        return f"node.{token(host)}"
    return role.value


def _api(*names: str) -> list[str]:
    return [f"$JS.API.{name}" for name in names]


def _log_reader(layout: BusLayout) -> list[str]:
    """What an ordered reader of the log and an appender's retry check publish."""
    s = layout.stream
    return [
        *_api(
            f"STREAM.INFO.{s}",
            f"CONSUMER.CREATE.{s}",  # ephemeral ordered consumer (no name, legacy form)
            f"CONSUMER.INFO.{s}.*",
            f"CONSUMER.DELETE.{s}.*",
            f"STREAM.MSG.GET.{s}",
            f"DIRECT.GET.{s}",  # the stream allows direct gets: readers may use them
            f"DIRECT.GET.{s}.>",
        ),
        f"$JS.FC.{s}.>",  # flow-control replies of push consumers
    ]


def _scheduler_buckets(layout: BusLayout) -> list[str]:
    """Lease KV and snapshot object store: open (create as is, else bind), read, write."""
    kv = f"KV_{layout.lease_bucket}"
    obj = f"OBJ_{layout.snapshot_bucket}"
    return [
        *_api(
            # CREATE with the config the bootstrap already used answers "exists";
            # another config is refused (name in use), so it cannot add a republish.
            f"STREAM.CREATE.{kv}",
            f"STREAM.INFO.{kv}",
            f"STREAM.MSG.GET.{kv}",
            f"STREAM.CREATE.{obj}",
            f"STREAM.INFO.{obj}",
            f"STREAM.MSG.GET.{obj}",
            f"STREAM.PURGE.{obj}",  # a put drops the chunks of the object it replaces
            "STREAM.NAMES",  # a get finds the stream of the chunk subject (names only)
            f"CONSUMER.CREATE.{obj}",  # a get reads chunks with an ordered consumer
            f"CONSUMER.INFO.{obj}.*",
            f"CONSUMER.DELETE.{obj}.*",
            f"CONSUMER.MSG.NEXT.{obj}.*",  # the scheduler fetches a snapshot's chunks in batches
        ),
        f"$JS.FC.{obj}.>",  # a snapshot of a few MB is read under flow control
        f"$KV.{layout.lease_bucket}.>",
        f"$O.{layout.snapshot_bucket}.>",
    ]


def _liveness_reader(layout: BusLayout) -> list[str]:
    """An ordered reader of the liveness bucket (each host's newest heartbeat)."""
    kv = liveness_stream(layout.stream)
    return [
        *_api(f"CONSUMER.CREATE.{kv}", f"CONSUMER.INFO.{kv}.*", f"CONSUMER.DELETE.{kv}.*"),
        f"$JS.FC.{kv}.>",
    ]


def _feed_reader(layout: BusLayout, host: str) -> list[str]:
    """Node agent X reads its host's views only: no consumer on the log, and consumers
    on the feed only with X's subject as filter (named consumers carry the filter in
    the create subject, `bus.feed`)."""
    feed = feed_stream(layout.stream)
    return [
        *_api(
            f"STREAM.INFO.{layout.stream}",  # connecting checks that the log exists
            f"CONSUMER.CREATE.{feed}.*.{feed_subject(host, layout.subject_prefix)}",
            f"CONSUMER.INFO.{feed}.*",
            f"CONSUMER.DELETE.{feed}.*",
        ),
        f"$JS.FC.{feed}.>",
    ]


def own_subjects(role: Role, layout: BusLayout, host: str | None = None) -> list[str]:
    """The log subjects a role writes (the one family it produces)."""
    p = layout.subject_prefix
    if role is Role.ADMISSION:
        return [f"{p}.requests"]
    if role is Role.SCHEDULER:
        return [f"{p}.decisions.*", feed_subjects(p)]  # and it relays the hosts' views
    if role is Role.WARMPOOL:
        return [f"{p}.timers"]
    if role is Role.NODE:
        user_name(role, host)  # checks that there is a host
        assert host is not None
        return [f"{p}.reports.{token(host)}"]
    return []


def permissions(role: Role, layout: BusLayout, host: str | None = None) -> Permissions | None:
    """The allow lists of a role; None for admin (no restriction)."""
    if role is Role.ADMIN:
        return None
    if role is Role.NODE:
        assert host is not None
        publish = [
            *own_subjects(role, layout, host),
            *_feed_reader(layout, host),
            beat_subject(layout.stream, host),
        ]
    else:
        publish = [*own_subjects(role, layout, host), *_log_reader(layout)]
    if role is Role.SCHEDULER:
        publish += [*_scheduler_buckets(layout), *_liveness_reader(layout)]
        publish.append(fast_subjects(layout.subject_prefix))  # views at once, unstored
    if role is Role.ADMISSION:
        publish += [logs_subjects(layout.subject_prefix), *_liveness_reader(layout)]
    inbox = NatsCredentials(user=user_name(role, host)).inbox_prefix()
    subscribe = [f"{inbox}.>"]
    if role is Role.NODE:
        assert host is not None
        subscribe.append(logs_subject(layout.subject_prefix, host))
        subscribe.append(fast_subject(host, layout.subject_prefix))  # its views at once
    return Permissions(
        publish=tuple(publish), subscribe=tuple(subscribe), allow_responses=role is Role.NODE
    )


def service_users(password_of: Callable[[str], str], hosts: Iterable[str]) -> list[NatsUser]:
    """The users of a deployment: admin, auditor, each service and each host's agent.

    `password_of(user name)` gives each user's password (say, `NatsPasswords.password`).
    """
    wanted: list[tuple[Role, str | None]] = [
        (Role.ADMIN, None),
        (Role.AUDITOR, None),
        *[(role, None) for role in SERVICE_ROLES],
        *[(Role.NODE, host) for host in hosts],
    ]
    return [
        NatsUser(
            name=user_name(role, host),
            password=password_of(user_name(role, host)),
            role=role,
            host=host,
        )
        for role, host in wanted
    ]


def server_config(
    users: Sequence[NatsUser], layout: BusLayout, *, tls: TlsFiles | None = None
) -> dict[str, object]:
    """The `authorization` (and `tls`) blocks of a nats-server config, as data: a
    deploy or cluster config can add its own blocks (`cluster`, `jetstream`) to it."""
    entries = []
    for user in users:
        entry: dict[str, object] = {"user": user.name, "password": user.password}
        allowed = permissions(user.role, layout, user.host)
        if allowed is not None:
            entry["permissions"] = {
                "publish": {"allow": list(allowed.publish)},
                "subscribe": {"allow": list(allowed.subscribe)},
            }
            if allowed.allow_responses:
                entry["permissions"]["allow_responses"] = {"max": 1}  # type: ignore[index]
        entries.append(entry)
    config: dict[str, object] = {
        "authorization": {"users": entries},
        "max_payload": MAX_PAYLOAD_BYTES,
    }
    if tls is not None:
        block: dict[str, object] = {
            "cert_file": tls.cert_file,
            "key_file": tls.key_file,
            "timeout": tls.handshake_timeout_s,
        }
        if tls.ca_file:
            block["ca_file"] = tls.ca_file
        if tls.verify:
            block["verify"] = True
        config["tls"] = block
    return config


def render_config(
    users: Sequence[NatsUser], layout: BusLayout, *, tls: TlsFiles | None = None
) -> str:
    """nats-server configuration text (JSON, which the config format accepts).

    Holds the passwords: write it with mode 0600. Listen address, port and store
    dir stay on the command line (`EmbeddedNats`), so one config serves any port.
    """
    return json.dumps(server_config(users, layout, tls=tls), indent=2) + "\n"
