"""Where a client finds its credentials: arguments, then the environment, then `qm up`'s dir.

In order, each piece from the first place that has it:
1. arguments (`token=`, `ca_file=`, `credentials_dir=`, `insecure=`);
2. `QM_TOKEN` (or `QM_TOKEN_FILE`), `QM_CA_FILE`, `QM_CREDENTIALS_DIR`, `QM_INSECURE=1`;
3. `QM_DATA_DIR/credentials/`, else `./.qm-data/credentials/` (what `qm up` writes:
   `ca.pem` and `admin.token`).
With a CA the channel is TLS and the token travels as `authorization: Bearer`;
with none (or `insecure`) the channel is plaintext, for `qm up --insecure`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import grpc
import msgspec

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client.bearer import BearerToken

DEFAULT_DATA_DIR = ".qm-data"


def _read_methods() -> list[dict[str, str]]:
    """The unary reads of qm.v1 (Describe*, List*, Get*): safe to send again."""
    return [
        {"service": service.full_name, "method": method.name}
        for service in pb.DESCRIPTOR.services_by_name.values()
        for method in service.methods
        if method.name.startswith(("Describe", "List", "Get")) and not method.server_streaming
    ]


# Reads are retried on UNAVAILABLE (an admission replica restarting, the read model
# behind) with backoff; writes are not (a submit without a client token could run
# twice). Keepalive pings every 30 s notice a dead connection; admission accepts them.
SERVICE_CONFIG = {
    "methodConfig": [
        {
            "name": _read_methods(),
            "retryPolicy": {
                "maxAttempts": 4,
                "initialBackoff": "0.2s",
                "maxBackoff": "2s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ]
}
CHANNEL_OPTIONS: list[tuple[str, str | int]] = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.enable_retries", 1),
    ("grpc.service_config", json.dumps(SERVICE_CONFIG)),
]


class ClientCredentials(msgspec.Struct, frozen=True, kw_only=True):
    token: str = ""
    ca_pem: bytes = b""
    insecure: bool = False

    def channel(self, address: str) -> grpc.Channel:
        if self.insecure or not self.ca_pem:
            return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        tls = grpc.ssl_channel_credentials(root_certificates=self.ca_pem)
        channel = grpc.secure_channel(address, tls, options=CHANNEL_OPTIONS)
        if not self.token:
            return channel
        # Not `access_token_call_credentials`: its plugin runs on a thread of its own
        # for every call (`client.bearer`).
        return grpc.intercept_channel(channel, BearerToken(self.token))


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _read(path: Path | None) -> bytes:
    return path.read_bytes() if path is not None and path.is_file() else b""


def find_credentials(
    *,
    token: str | None = None,
    ca_file: str | Path | None = None,
    credentials_dir: str | Path | None = None,
    insecure: bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientCredentials:
    env = os.environ if environ is None else environ
    if insecure is None:
        insecure = _truthy(env.get("QM_INSECURE"))
    if insecure:
        return ClientCredentials(insecure=True)
    directory = credentials_dir or env.get("QM_CREDENTIALS_DIR")
    if not directory:
        directory = Path(env.get("QM_DATA_DIR") or DEFAULT_DATA_DIR) / "credentials"
    folder = Path(directory)
    ca = ca_file or env.get("QM_CA_FILE")
    ca_pem = _read(Path(ca)) if ca else _read(folder / "ca.pem")
    if token is None:
        token = env.get("QM_TOKEN") or ""
    if not token and env.get("QM_TOKEN_FILE"):
        token = _read(Path(env["QM_TOKEN_FILE"])).decode()
    if not token:
        token = _read(folder / "admin.token").decode()
    return ClientCredentials(token=token.strip(), ca_pem=ca_pem)
