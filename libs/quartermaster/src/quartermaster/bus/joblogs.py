"""Job output over NATS request/reply: admission asks a host's node agent for a range of
an attempt's kept log.

The subject is `<prefix>_logs.<host>`, outside the log stream's `<prefix>.>`, so no
request is ever stored. Admission may publish requests there (any host); the agent of
host X may subscribe on its own subject only and answer the requests it receives
(`embedded.nats_auth`). Offsets count bytes of the attempt's whole output: a log
kept capped (head and tail) says which bytes it dropped, and a read into them skips
ahead and says how many were skipped.
"""

from __future__ import annotations

import msgspec

from quartermaster.core.provenance import token

MAX_CHUNK_BYTES = 256 * 1024  # per reply: well under NATS's default 1 MiB payload


class LogRequest(msgspec.Struct, frozen=True, kw_only=True):
    job_id: str
    attempt: int
    offset: int = 0
    max_bytes: int = MAX_CHUNK_BYTES


class LogReply(msgspec.Struct, frozen=True, kw_only=True):
    found: bool  # False: this host keeps no log of the attempt (never launched, or expired)
    data: bytes = b""
    offset: int = 0  # where `data` starts in the attempt's output
    skipped_bytes: int = 0  # bytes between the asked offset and `offset` not kept (cap)
    complete: bool = False  # the attempt ended on this host: no more output will come


def logs_subject(prefix: str, host: str) -> str:
    return f"{prefix}_logs.{token(host)}"


def logs_subjects(prefix: str) -> str:
    """Every host's log subject (what admission may publish to)."""
    return f"{prefix}_logs.*"


def encode(message: LogRequest | LogReply) -> bytes:
    return msgspec.msgpack.encode(message)


def decode_request(data: bytes) -> LogRequest:
    return msgspec.msgpack.decode(data, type=LogRequest)


def decode_reply(data: bytes) -> LogReply:
    return msgspec.msgpack.decode(data, type=LogReply)
