"""How a service reaches NATS: the servers of a cluster, its credentials, TLS.

One struct for every service, read by the shared settings mechanism: each
service's settings inherit `BusSettings`, so `QM_<SERVICE>_NATS_URL` takes one URL
or a comma-separated list (the nodes of a cluster: nats-py fails over between
them), `..._NATS_USER`/`..._NATS_PASSWORD` or `..._NATS_CREDS_FILE` name the
service's NATS user, and `..._NATS_TLS_*` turn on (mutual) TLS.
"""

from __future__ import annotations

import logging
import re
import ssl
from typing import Any

import msgspec

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"


class NatsCredentials(msgspec.Struct, frozen=True, kw_only=True):
    """Who this connection is (user/password or a creds file) and how it is encrypted."""

    user: str = ""
    password: str = ""
    creds_file: str = ""  # nkeys/JWT user credentials file
    tls_ca: str = ""  # CA bundle that signed the servers' certificates
    tls_cert: str = ""  # this client's certificate (mutual TLS)
    tls_key: str = ""

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments for `nats.connect`."""
        options: dict[str, Any] = {}
        if self.user:
            options["user"] = self.user
            options["password"] = self.password
        if self.creds_file:
            options["user_credentials"] = self.creds_file
        if self.tls_ca or self.tls_cert:
            context = ssl.create_default_context(
                ssl.Purpose.SERVER_AUTH, cafile=self.tls_ca or None
            )
            if self.tls_cert:
                context.load_cert_chain(self.tls_cert, self.tls_key or None)
            options["tls"] = context
            # Once per process (addFilter keeps one copy of the same filter).
            logging.getLogger("asyncio").addFilter(quiet_tls_close)
        return options

    def inbox_prefix(self) -> str | None:
        """`_INBOX_<user>`: where this user's replies go (None: the default `_INBOX`).

        A user of its own gets replies (acks, API answers, consumer deliveries) on
        inboxes only it may subscribe to (`embedded.nats_auth`), so no service reads
        another's replies or learns the names of its consumers.
        """
        return f"_INBOX_{_INBOX_UNSAFE.sub('_', self.user)}" if self.user else None


_INBOX_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def quiet_tls_close(record: logging.LogRecord) -> bool:
    """Drops asyncio's "returning true from eof_received() has no effect when using ssl".

    nats-py upgrades a plain connection with `start_tls`, so its stream protocol does not
    know it is over TLS and asyncio warns once per connection its peer closes: harmless,
    and noise at every stop of a secured stack (services, `qm up`, benchmarks)."""
    return "eof_received()" not in record.getMessage()


def server_list(nats_url: str) -> list[str]:
    """`a,b,c` -> the servers of a cluster (one URL is a cluster of one)."""
    servers = [url.strip() for url in nats_url.split(",") if url.strip()]
    return servers or [DEFAULT_NATS_URL]


class BusSettings(msgspec.Struct, frozen=True, kw_only=True):
    """The bus part of every service's settings (inherited; fields read with its prefix)."""

    nats_url: str = DEFAULT_NATS_URL  # one URL, or a comma-separated list of a cluster's nodes
    nats_user: str = ""
    nats_password: str = ""
    nats_creds_file: str = ""
    nats_tls_ca: str = ""
    nats_tls_cert: str = ""
    nats_tls_key: str = ""
    stream: str = "QM"
    subject_prefix: str = "qm"
    stream_replicas: int = 1  # 3 on a 3-node cluster: the log survives the loss of a node
    # Move, once connected, to the node that leads the stream, by one of `nats_url`'s URLs:
    # appends and pushed messages then cross no route between the nodes (bus.near_leader).
    nats_near_log_leader: bool = True

    def nats_credentials(self) -> NatsCredentials:
        return NatsCredentials(
            user=self.nats_user,
            password=self.nats_password,
            creds_file=self.nats_creds_file,
            tls_ca=self.nats_tls_ca,
            tls_cert=self.nats_tls_cert,
            tls_key=self.nats_tls_key,
        )
