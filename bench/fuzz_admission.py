"""Fuzz admission's tenant boundary and input screen on a secured in-process stack.

Starts `qm up`'s stack (TLS gRPC, Ed25519 bearer tokens, embedded NATS and
Postgres under a temp dir, 2 node agents), sets up one queue with shares A and B
and a few jobs in each, then sends `--requests` hostile calls over every RPC of
every qm.v1 service (found through the descriptors, so a new RPC is covered),
as every kind of caller: no token, garbage tokens, a token of another key, an
expired one, one that expired after admission had cached it, a signed token
with no role, admin, auditor, a member of A and a member of B. Requests are
generated from the message descriptors (edge values per field type) or are
mutations of valid requests; a few go as raw bytes that are not a valid message.

Phases:
1. refused (40%): only calls that must be refused or only read (no credentials,
   auditor, members on admin RPCs or aimed at the other share); the newest request
   envelope's seq (audit table) and a digest of the read model must not move;
2. race (5%): member B submits jobs with client tokens while member A, who can
   derive their ids, updates and terminates them as they appear; A never succeeds;
3. mixed (40%): every role, every RPC, anything; a member's accepted write must
   touch its own share's jobs (checked afterwards as admin);
4. refused again (15%), on the state the mixed phase left.
Every answer to a member (reply or error details) is scanned for the other share's
job ids and names that the member did not send itself.

Prints requests, rates, counts per status and per role, and the findings:
crashes (connection lost, a server task died), INTERNAL/UNKNOWN statuses,
violations (an accepted call the caller had no right to, a leak, a state
change by a refused phase). Exit status 1 if any. Memory is the RSS of this
process, which holds the whole stack (admission, scheduler, warm pools, node
agents) and the fuzzing client; nats-server and Postgres run as child processes
and are not counted.

    python bench/fuzz_admission.py [--requests 100000] [--seed 1] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import datetime as dt
import gc
import hashlib
import hmac
import json
import logging
import random
import resource
import string
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import grpc
import jwt
from cryptography.hazmat.primitives import serialization
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.auth import Role, ShareRef
from quartermaster.auth.local import LocalCredentials
from quartermaster.client import Quartermaster, training_job
from quartermaster.eventlog import subjects
from quartermaster.store import arns
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread

UNIT = "ml.g5.xlarge"
QUEUE = "q"
SHARES = ("A", "B")
LONG = ["sh", "-c", "trap 'exit 143' TERM; sleep 600 & wait"]
# Job ids derived from client tokens, as admission derives them (uuid5 over queue/token).
TOKEN_NAMESPACE = uuid.UUID("6f1d8c36-5b0e-4c55-9a43-6a7f0b8f2a51")
UNAUTHENTICATED_ROLES = ("none", "garbage", "forged", "expired", "expired_cached")
ROLES = (*UNAUTHENTICATED_ROLES, "no_roles", "auditor", "member_a", "member_b", "admin")
MEMBER_SHARE = {"member_a": "A", "member_b": "B"}
# What a member may call at all (everything else is PERMISSION_DENIED for it).
MEMBER_MAY = {
    "ServiceJobs": None,  # every RPC, on its own share's jobs
    "WarmPools": {"UpdateWarmPool"},
    "QuotaManagement": {
        "GetJobQueueSnapshot",
        "DescribeQuotaShare",
        # on its own share's jobs (and the share's tags, read)
        "TagResource",
        "UntagResource",
        "ListTagsForResource",
    },
}
WRITE_PREFIXES = ("Create", "Update", "Delete", "Submit", "Terminate", "Drain", "Tag", "Untag")
# The race runs before the mixed phase, whose admin calls may disable or delete share B.
PHASES = (("refused", 0.40), ("race", 0.05), ("mixed", 0.40), ("refused_again", 0.15))
CALL_TIMEOUT_S = 20.0
WATCH_TIMEOUT_S = 1.0
SHOW = 5
T = TypeVar("T")
# Hostile read-your-writes positions (printable ASCII: a client sends no other metadata).
MIN_SEQ_VALUES = ("abc", "-1", "1e5", "9" * 30, " 1", "", "0x10", "+5", "9" * 19)


# ---- the RPCs --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Rpc:
    service: str
    name: str
    path: str
    request: type[Message]
    response: type[Message]
    streaming: bool

    @property
    def writes(self) -> bool:
        return self.name.startswith(WRITE_PREFIXES)

    def member_may(self) -> bool:
        if self.service not in MEMBER_MAY:
            return False
        allowed = MEMBER_MAY[self.service]
        return allowed is None or self.name in allowed


def every_rpc() -> list[Rpc]:
    """Every method of every service of the qm.v1 package, from the descriptors."""
    found = []
    for service in pb.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            found.append(_rpc(service.name, method))
    return found


def _rpc(service: str, method: MethodDescriptor) -> Rpc:
    return Rpc(
        service=service,
        name=method.name,
        path=f"/{method.containing_service.full_name}/{method.name}",
        request=getattr(pb, method.input_type.name),
        response=getattr(pb, method.output_type.name),
        streaming=method.server_streaming,
    )


# ---- the world the fuzzer knows ------------------------------------------------------


@dataclasses.dataclass
class World:
    """Names, ids and tokens the generator draws on (secrets of each share included)."""

    jobs: dict[str, list[str]]  # share -> job ids
    names: dict[str, list[str]]  # share -> job names (unique, so a leak is recognisable)
    tokens: dict[str, list[str]]  # role -> bearer metadata values ("" = none)
    page_tokens: list[str]
    request_subject: str
    rpcs: list[Rpc]

    def other(self, share: str) -> str:
        return "B" if share == "A" else "A"


def job_id_for_token(queue: str, client_token: str) -> str:
    return uuid.uuid5(TOKEN_NAMESPACE, f"{queue}/{client_token}").hex


def payload(command: list[str] = LONG, **fields: Any) -> str:
    return json.dumps(training_job(command=command, instance_type=UNIT, **fields))


def setup(stack: StackThread) -> World:
    """Configure the queue and shares as admin and submit jobs in both shares."""
    assert stack.credentials_dir is not None
    creds = LocalCredentials(stack.credentials_dir)
    admin = Quartermaster(stack.address, timeout=30, credentials_dir=stack.credentials_dir)
    admin.create_service_environment("env", {UNIT: 2})
    admin.create_scheduling_policy("fifo")
    admin.create_job_queue(QUEUE, "env", "fifo")
    for share in SHARES:
        admin.create_quota_share(QUEUE, share, {UNIT: 1}, "RESERVE", None, False)
    jobs: dict[str, list[str]] = {s: [] for s in SHARES}
    names: dict[str, list[str]] = {s: [] for s in SHARES}
    for share in SHARES:
        member = Quartermaster(
            stack.address, timeout=30, token=_token(creds, share), ca_file=creds.ca
        )
        for i in range(3):  # one runs, two wait
            name = f"secret-{share}-{i}-{uuid.uuid4().hex[:8]}"
            request = pb.SubmitServiceJobRequest(
                job_name=name,
                job_queue=QUEUE,
                quota_share_name=share,
                service_request_payload=payload(),
                client_token=f"setup-{share}-{i}",
            )
            jobs[share].append(member.call(member.jobs.SubmitServiceJob, request).job_id)
            names[share].append(name)
        member.close()
    deadline = time.monotonic() + 60
    while not all(_status(admin, j[0]) == pb.JOB_STATUS_RUNNING for j in jobs.values()):
        if time.monotonic() > deadline:
            raise TimeoutError("the setup jobs did not start")
        time.sleep(0.2)
    page_tokens = _page_tokens(admin)
    admin.close()
    return World(
        jobs=jobs,
        names=names,
        tokens=_role_tokens(creds),
        page_tokens=page_tokens,
        request_subject=subjects.requests(stack.stack.settings.subject_prefix),
        rpcs=every_rpc(),
    )


def _status(client: Quartermaster, job_id: str) -> int:
    return int(client.describe_job(job_id).status)


def _token(creds: LocalCredentials, share: str) -> str:
    subject = f"team-{share.lower()}"
    return creds.issue(subject, [Role.MEMBER], [ShareRef(QUEUE, share)], issued_at=time.time())


def _page_tokens(admin: Quartermaster) -> list[str]:
    """Real sealed tokens from list replies, replayed into other RPCs and edited."""
    found = []
    for method, request in (
        (admin.jobs.ListServiceJobs, pb.ListServiceJobsRequest(job_queue=QUEUE, max_results=1)),
        (admin.quota.ListQuotaShares, pb.ListQuotaSharesRequest(job_queue=QUEUE, max_results=1)),
        (admin.nodes.ListNodes, pb.ListNodesRequest(max_results=1)),
    ):
        token = admin.call(method, request).next_token
        if token:
            found.append(token)
    return found


def _role_tokens(creds: LocalCredentials) -> dict[str, list[str]]:
    now = time.time()
    other = LocalCredentials.ensure(creds.directory.parent / "other-key", dt.datetime.now(dt.UTC))
    admin_token = creds.admin_token.read_text().strip()
    return {
        "none": [""],
        "garbage": [f"Bearer {t}" for t in _garbage_tokens(creds, admin_token, now)]
        + ["Basic YWRtaW46YWRtaW4=", "Bearer", "Bearer ", admin_token, "bearer  "],
        "forged": [f"Bearer {other.issue('admin', [Role.ADMIN], issued_at=now)}"],
        "expired": [
            "Bearer " + creds.issue("admin", [Role.ADMIN], issued_at=now - 7200, lifetime_s=3600)
        ],
        # Valid for 4 s more (exp + the 30 s leeway), used before it expires: see `warm_cache`.
        "expired_cached": [
            "Bearer "
            + creds.issue("admin", [Role.ADMIN], issued_at=now - 3600, lifetime_s=3600 - 26)
        ],
        "no_roles": [f"Bearer {_signed(creds, {'roles': []}, now)}"],
        "auditor": [f"Bearer {creds.issue('audit', [Role.AUDITOR], issued_at=now)}"],
        "member_a": [f"Bearer {_token(creds, 'A')}"],
        "member_b": [f"Bearer {_token(creds, 'B')}"],
        "admin": [f"Bearer {admin_token}"],
    }


def _claims(now: float) -> dict[str, Any]:
    return {
        "sub": "admin",
        "roles": ["admin"],
        "shares": [],
        "iss": "quartermaster",
        "aud": "qm.v1",
        "iat": int(now),
        "exp": int(now + 3600),
    }


def _signed(creds: LocalCredentials, changes: dict[str, Any], now: float) -> str:
    key = serialization.load_pem_private_key(creds.signing_key.read_bytes(), password=None)
    claims = {**_claims(now), **changes}
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm="EdDSA")  # type: ignore[arg-type]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _garbage_tokens(creds: LocalCredentials, admin_token: str, now: float) -> list[str]:
    """Tokens that must all be refused as UNAUTHENTICATED, signed by our key or not."""
    header, body, signature = admin_token.split(".")
    claims = _b64(json.dumps(_claims(now)).encode())
    public = creds.verify_key.read_bytes()
    hs_header = _b64(b'{"alg":"HS256","typ":"JWT"}')
    none_header = _b64(b'{"alg":"none","typ":"JWT"}')
    hs_mac = hmac.new(public, f"{hs_header}.{claims}".encode(), hashlib.sha256).digest()
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    signed_wrong: list[dict[str, Any]] = [
        {"aud": "other"},
        {"iss": "someone"},
        {"exp": None},
        {"sub": None},
        {"sub": ""},
        {"sub": 7},
        {"sub": "ad\x00min"},
        {"roles": ["root"]},
        {"roles": "admin"},
        {"shares": ["q/A/x"]},
        {"shares": "q/A"},
        {"exp": "never"},
        {"iat": int(now) + 86400 * 365, "nbf": int(now) + 86400},
    ]
    return [
        "not-a-jwt",
        "a.b.c",
        f"{header}.{body}",
        f"{header}.{body}.",
        f"{header}.{body}.{flipped}",
        f"{none_header}.{claims}.",
        f"{hs_header}.{claims}.{_b64(hs_mac)}",
        "x" * 16384,
        *[_signed(creds, change, now) for change in signed_wrong],
    ]


# ---- values ----------------------------------------------------------------------


class Values:
    """Hostile and plausible values per field, drawn from a seeded generator."""

    def __init__(self, rng: random.Random, world: World) -> None:
        self.rng = rng
        self.world = world
        all_ids = [j for ids in world.jobs.values() for j in ids]
        self.ids = all_ids
        self.arns = [
            arns.job_queue(QUEUE),
            arns.job_queue("nope"),
            arns.quota_share(QUEUE, "A"),
            arns.quota_share(QUEUE, "B"),
            arns.service_environment("env"),
            arns.scheduling_policy("fifo"),
            *[arns.job(j) for j in all_ids[:2]],
            "arn:",
            "arn:qm:batch:local:000000000000:job-queue/",
            "arn:qm:batch:local:000000000000:job-queue/q/extra",
            "arn:aws:batch:us-east-1:123456789012:job-queue/q",
            "arn:qm:batch:local:000000000000:service-environment/q",
            "arn::::::",
        ]
        self.strings = [
            "",
            " ",
            "q",
            "A",
            "B",
            "env",
            "fifo",
            "node-1",
            "node-2",
            "ml.g5.xlarge",
            "SAGEMAKER_TRAINING",
            "x" * 128,
            "x" * 129,
            "a\x00b",
            "\x00",
            "é",
            "日本語",
            "\U0001f642" * 50,
            "\u202e\u200b\ufeff",
            "\x7f\x1b[2J",
            "\t\n\r",
            "*",
            "?[!a]",
            "%s%n%x",
            "{}",
            "null",
            "-1",
            "0",
            "1e400",
            "9" * 400,
            "../../etc/passwd",
            "' OR 1=1 --",
            "q/A",
            "JOB_NAME",
            "BEFORE_CREATED_AT",
            "AFTER_CREATED_AT",
            uuid.uuid4().hex,
            uuid.uuid4().hex.upper(),
        ]

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, items: Sequence[T]) -> T:
        return items[self.rng.randrange(len(items))]

    huge_left = 1  # huge strings per request (reset for each one)

    def huge_string(self) -> str:
        self.huge_left -= 1
        size = self.pick([1_000, 70_000, 300_000, 1_200_000])
        return self.pick(["x", "é", "\x00", "日"]) * size

    def string(self, field: str) -> str:
        if self.huge_left > 0 and self.chance(0.02):
            return self.huge_string()
        if field in ("job_id", "job_ids", "reused_by_job"):
            return self.job_id()
        if field in ("job_queue", "job_queues", "scheduling_policy_arn", "service_environment"):
            return self.pick([*self.arns, *self.strings[:8]])
        if field in ("quota_share_name",):
            return self.pick(["A", "B", "A", "B", "C", *self.arns[2:4], *self.strings])
        if field == "next_token":
            return self.page_token()
        if field == "service_request_payload":
            return self.payload_text()
        if field == "client_token":
            return self.pick(["setup-A-0", "setup-B-0", "t" * 64, "t" * 65, "é", "tok"])
        if field == "name" and self.chance(0.5):
            return self.pick(["JOB_NAME", "BEFORE_CREATED_AT", "AFTER_CREATED_AT", "fifo"])
        if self.chance(0.1):
            return self.pick(self.arns)
        if self.chance(0.1):
            return "".join(self.rng.choice(string.printable) for _ in range(self.rng.randrange(40)))
        return self.pick(self.strings)

    def job_id(self) -> str:
        roll = self.rng.random()
        if roll < 0.7:
            return self.pick(self.ids)
        if roll < 0.8:
            return arns.job(self.pick(self.ids))
        if roll < 0.9:
            return job_id_for_token(QUEUE, self.pick(["setup-A-0", "setup-B-1", "race-0"]))
        return self.pick(self.strings)

    def page_token(self) -> str:
        tokens = self.world.page_tokens or ["e30.AAAA"]
        real = self.pick(tokens)
        body, _, mac = real.rpartition(".")
        return self.pick(
            [
                real,
                real,
                f"{body}.{mac[::-1]}",
                f"{body}x.{mac}",
                real[:-1],
                _b64(b"o:5"),
                f"{_b64(b'o:1')}.AAAAAAAAAAAAAAAAAAAAAA",
                f"{_b64(b'o:-1')}.{mac}",
                "." * 5,
                "x" * 2000,
                "é.é",
                "\x00.\x00",
                f"{body}.{mac}.{mac}",
            ]
        )

    def integer(self, bits: int, unsigned: bool = False) -> int:
        top = (1 << (bits - 1)) - 1 if not unsigned else (1 << bits) - 1
        low = -(1 << (bits - 1)) if not unsigned else 0
        edges = [0, 0, 1, -1, 2, 5, 10, 11, 9999, 10000, 3600, 3601, 10**6, top, low, top - 1]
        value = self.pick(edges) if self.chance(0.8) else self.rng.randint(low, top)
        return max(low, min(top, value))

    def enum(self, field: FieldDescriptor) -> int:
        numbers = [v.number for v in field.enum_type.values]
        return int(self.pick([*numbers, *numbers, 99, -1, 2**31 - 1, -(2**31)]))

    # ---- JSON payloads -----------------------------------------------------------

    def payload_text(self) -> str:
        roll = self.rng.random()
        if roll < 0.25:
            return payload()
        if roll < 0.75:
            return self.mutated_payload()
        text = self.pick(
            [
                "",
                "{",
                "[]",
                "null",
                "1",
                '"s"',
                "[" * 100_000 + "]" * 100_000,
                '{"a":' * 5000 + "1" + "}" * 5000,
                '{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1e400}}',
                '{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":'
                + "1" * 5000
                + "}}",
                '{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":NaN}}',
                '{"ResourceConfig":{"InstanceType":"\\ud800","InstanceCount":1}}',
                '{"ResourceConfig":{"InstanceType":"ml.g5.xlarge\\u0000","InstanceCount":1}}',
                '{"\\udfff":1,"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}',
                '{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},'
                '"x":' + "[" * 40 + "]" * 40 + "}",
                json.dumps({"ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1}})
                + " " * 300_000,
            ]
        )
        if len(text) > 10_000:  # a big one counts as the request's huge string
            if self.huge_left <= 0:
                return payload()
            self.huge_left -= 1
        return text

    def mutated_payload(self) -> str:
        doc: dict[str, Any] = training_job(command=LONG, instance_type=UNIT)
        doc["StoppingCondition"] = {"MaxRuntimeInSeconds": 3600}
        doc["VpcConfig"] = {"SecurityGroupIds": ["sg-1"], "Subnets": ["s-1"]}
        doc["SessionChainingConfig"] = {"EnableSessionTagChaining": True}
        targets = [
            ("ResourceConfig", "InstanceType"),
            ("ResourceConfig", "InstanceCount"),
            ("ResourceConfig", "KeepAlivePeriodInSeconds"),
            ("ResourceConfig", "VolumeSizeInGB"),
            ("ResourceConfig", "VolumeKmsKeyId"),
            ("StoppingCondition", "MaxRuntimeInSeconds"),
            ("VpcConfig", "SecurityGroupIds"),
            ("VpcConfig", "Subnets"),
            ("SessionChainingConfig", "EnableSessionTagChaining"),
            ("Environment", "K"),
            ("HyperParameters", "lr"),
            ("RoleArn", None),
            ("ResourceConfig", None),
            ("StoppingCondition", None),
            ("Tags", None),
        ]
        raw: str | None = None
        for _ in range(self.rng.randrange(1, 4)):
            outer, inner = self.pick(targets)
            value, text = self.json_value()
            if text is not None:
                raw = text
                value = "__RAW__"
            if inner is None:
                doc[outer] = value
            elif isinstance(doc.get(outer), dict):
                doc[outer][inner] = value
            else:
                doc[outer] = {inner: value}
        encoded = json.dumps(doc, allow_nan=True)
        if raw is not None:
            encoded = encoded.replace('"__RAW__"', raw)
        return encoded

    def json_value(self) -> tuple[Any, str | None]:
        """A JSON value, or raw JSON text (numbers Python would not print as given)."""
        raw = [
            "1e400",
            "-1e400",
            "1" * 400,
            "-" + "9" * 30,
            "NaN",
            "Infinity",
            '"\\ud800"',
            '"a\\u0000b"',
            "[" * 33 + "1" + "]" * 33,
            "[" * 2000 + "]" * 2000,
            "1.5",
            "-0",
            "9223372036854775808",
            "-9223372036854775809",
        ]
        if self.chance(0.4):
            return None, self.pick(raw)
        plain: list[Any] = [
            0,
            -1,
            1,
            2**31,
            2**63 - 1,
            -(2**63),
            True,
            None,
            "",
            "ml.p4d.24xlarge",
            UNIT,
            "x" * (10_000 if self.huge_left > 0 else 100),
            "日本語",
            [],
            {},
            ["sg-1"] * 500,
            {"k" * 64: "v"},
            {f"k{i}": i for i in range(300)},
            [{"Key": "a", "Value": "b"}],
        ]
        return self.pick(plain), None


# ---- requests --------------------------------------------------------------------


class Requests:
    """Requests generated from descriptors, and mutations of valid ones."""

    def __init__(self, values: Values) -> None:
        self.v = values

    def generated(self, descriptor: Descriptor, depth: int = 0) -> Message:
        message: Message = getattr(pb, descriptor.name)()
        self.v.huge_left = 1
        self._fill(message, depth)
        return message

    def _fill(self, message: Message, depth: int) -> None:
        for field in message.DESCRIPTOR.fields:
            if not self.v.chance(0.6 if depth == 0 else 0.4):
                continue
            self._set(message, field, depth)

    def _set(self, message: Message, field: FieldDescriptor, depth: int) -> None:
        v = self.v
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            target = getattr(message, field.name)
            count = 200 if depth == 0 and v.chance(0.05) else v.rng.randrange(4)
            for i in range(count):
                key = v.string("key") if v.chance(0.7) else f"k{i}"
                target[key] = v.string("value")
            return
        if field.is_repeated:
            count = v.rng.randrange(4)
            if depth == 0 and v.chance(0.03):
                count = v.pick([1001, 5000, 20000])  # huge: copies of one item, cheap to build
                v.huge_left = 0  # and no huge string in it (20000 copies of 1 MB)
            items = getattr(message, field.name)
            if field.type != FieldDescriptor.TYPE_MESSAGE:
                first = [self._scalar(field) for _ in range(min(count, 8))]
                items.extend((first * (count // max(1, len(first)) + 1))[:count])
            elif depth < 3 and count:
                first = [items.add() for _ in range(min(count, 3))]
                for item in first:
                    self._fill(item, depth + 1)
                for _ in range(count - len(first)):
                    items.add().CopyFrom(first[0])
            return
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth < 3:
                self._fill(getattr(message, field.name), depth + 1)
                getattr(message, field.name).SetInParent()
            return
        setattr(message, field.name, self._scalar(field))

    def _scalar(self, field: FieldDescriptor) -> Any:
        t = field.type
        v = self.v
        if t == FieldDescriptor.TYPE_STRING:
            return v.string(field.name)
        if t == FieldDescriptor.TYPE_BYTES:
            return v.pick([b"", b"\xff\xfe", b"\x00" * 10, "é".encode(), b"\xed\xa0\x80"])
        if t == FieldDescriptor.TYPE_BOOL:
            return v.chance(0.5)
        if t == FieldDescriptor.TYPE_ENUM:
            return v.enum(field)
        if t in (
            FieldDescriptor.TYPE_INT64,
            FieldDescriptor.TYPE_SINT64,
            FieldDescriptor.TYPE_SFIXED64,
        ):
            return v.integer(64)
        if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
            return v.integer(64, unsigned=True)
        if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
            return v.integer(32, unsigned=True)
        if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
            return v.pick([0.0, -0.0, float("nan"), float("inf"), 1e308])
        return v.integer(32)

    # ---- valid requests, then mutated ---------------------------------------------

    def valid(self, rpc: Rpc, share: str) -> Message:
        """A request the RPC would accept from a caller of `share` (or admin)."""
        v = self.v
        world = v.world
        own_job = v.pick(world.jobs[share])
        submit = pb.SubmitServiceJobRequest(
            job_name=f"fz-{v.rng.randrange(10**9)}",
            job_queue=v.pick([QUEUE, arns.job_queue(QUEUE)]),
            quota_share_name=share,
            service_request_payload=payload(),
            scheduling_priority=v.rng.randrange(10),
            tags={"team": share},
        )
        limits = [pb.CapacityLimit(capacity_unit=UNIT, max_capacity=v.rng.randint(1, 3))]
        fresh = f"fz{v.rng.randrange(10**9)}"
        templates: dict[str, Callable[[], Message]] = {
            "CreateServiceEnvironment": lambda: pb.CreateServiceEnvironmentRequest(
                service_environment_name=fresh, capacity_limits=limits
            ),
            "UpdateServiceEnvironment": lambda: pb.UpdateServiceEnvironmentRequest(
                service_environment="env", capacity_limits=limits
            ),
            "CreateSchedulingPolicy": lambda: pb.CreateSchedulingPolicyRequest(name=fresh),
            "CreateJobQueue": lambda: pb.CreateJobQueueRequest(
                job_queue_name=fresh,
                scheduling_policy_arn="fifo",
                service_environment_order=[
                    pb.ServiceEnvironmentOrder(order=1, service_environment="env")
                ],
            ),
            "UpdateJobQueue": lambda: pb.UpdateJobQueueRequest(
                job_queue=QUEUE, scheduling_policy_arn="fifo"
            ),
            "GetJobQueueSnapshot": lambda: pb.GetJobQueueSnapshotRequest(job_queue=QUEUE),
            "CreateQuotaShare": lambda: pb.CreateQuotaShareRequest(
                job_queue=QUEUE, quota_share_name=fresh, capacity_limits=limits
            ),
            "UpdateQuotaShare": lambda: pb.UpdateQuotaShareRequest(
                job_queue=QUEUE, quota_share_name=share, capacity_limits=limits[:1]
            ),
            "DeleteQuotaShare": lambda: pb.DeleteQuotaShareRequest(
                job_queue=QUEUE, quota_share_name=fresh
            ),
            "DescribeQuotaShare": lambda: pb.DescribeQuotaShareRequest(
                job_queue=QUEUE, quota_share_name=share
            ),
            "ListQuotaShares": lambda: pb.ListQuotaSharesRequest(job_queue=QUEUE),
            "SubmitServiceJob": lambda: submit,
            "SubmitServiceJobs": lambda: pb.SubmitServiceJobsRequest(jobs=[submit, submit]),
            "UpdateServiceJob": lambda: pb.UpdateServiceJobRequest(
                job_id=own_job, scheduling_priority=v.rng.randrange(10)
            ),
            "TerminateServiceJob": lambda: pb.TerminateServiceJobRequest(
                job_id=own_job, reason="fuzz"
            ),
            "DescribeServiceJob": lambda: pb.DescribeServiceJobRequest(job_id=own_job),
            "ListServiceJobs": lambda: pb.ListServiceJobsRequest(
                job_queue=QUEUE,
                quota_share_name=share,
                filters=[pb.KeyValuesPair(name="JOB_NAME", values=["secret-*"])],
            ),
            "WatchServiceJobs": lambda: pb.WatchServiceJobsRequest(
                job_queue=QUEUE, quota_share_name=share, after_sequence=1
            ),
            "ExplainServiceJob": lambda: pb.ExplainServiceJobRequest(job_id=own_job),
            "UpdateWarmPool": lambda: pb.UpdateWarmPoolRequest(
                job_id=own_job, keep_alive_period_in_seconds=60
            ),
            "DrainNode": lambda: pb.DrainNodeRequest(host_id="node-9"),
            "UndrainNode": lambda: pb.UndrainNodeRequest(host_id="node-9"),
            "GetServiceJobLogs": lambda: pb.GetServiceJobLogsRequest(job_id=own_job),
        }
        make = templates.get(rpc.name)
        return make() if make is not None else rpc.request()

    def mutated(self, request: Message) -> Message:
        """`request` with one to three fields (at any depth) replaced, cleared or bloated."""
        self.v.huge_left = 1
        for _ in range(self.v.rng.randrange(1, 4)):
            self._mutate_one(request, 0)
        return request

    def _mutate_one(self, message: Message, depth: int) -> None:
        fields = list(message.DESCRIPTOR.fields)
        field = self.v.pick(fields)
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if field.type == FieldDescriptor.TYPE_MESSAGE and not is_map and depth < 3:
            if field.is_repeated:
                items = getattr(message, field.name)
                if len(items) and self.v.chance(0.7):
                    self._mutate_one(items[self.v.rng.randrange(len(items))], depth + 1)
                    return
            elif message.HasField(field.name) and self.v.chance(0.7):
                self._mutate_one(getattr(message, field.name), depth + 1)
                return
        if self.v.chance(0.2):
            message.ClearField(field.name)
            return
        if field.is_repeated or is_map:
            message.ClearField(field.name)
        self._set(message, field, depth)


# ---- raw bytes that are no valid message -------------------------------------------


def undecodable(rng: random.Random, request: Message) -> bytes:
    """Wire bytes a server cannot parse as the request type (or barely can)."""
    data = bytearray(request.SerializeToString())
    roll = rng.random()
    if roll < 0.3:
        # Field 1 as a length-delimited string of invalid UTF-8 (most requests' field 1 is one).
        bad = rng.choice([b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\x80", b"a\x80b"])
        return bytes([0x0A, len(bad)]) + bad + bytes(data)
    if roll < 0.5:
        return bytes(data[: rng.randrange(len(data) + 1)]) + b"\x0a\xff\xff\xff\xff\x0f"
    if roll < 0.7:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    if roll < 0.85 and data:
        for _ in range(3):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    return b"\x08" + b"\xff" * 11  # a varint longer than ten bytes


# ---- outcomes --------------------------------------------------------------------


@dataclasses.dataclass
class Finding:
    kind: str
    role: str
    method: str
    detail: str
    request: str

    def line(self) -> str:
        return f"[{self.kind}] {self.role} {self.method}: {self.detail} | request: {self.request}"


@dataclasses.dataclass
class Report:
    sent: int = 0
    elapsed_s: float = 0.0
    by_code: Counter[str] = dataclasses.field(default_factory=Counter)
    by_role: dict[str, Counter[str]] = dataclasses.field(default_factory=dict)
    by_phase: dict[str, int] = dataclasses.field(default_factory=dict)
    by_method: Counter[str] = dataclasses.field(default_factory=Counter)
    crashes: list[Finding] = dataclasses.field(default_factory=list)
    internal: list[Finding] = dataclasses.field(default_factory=list)
    violations: list[Finding] = dataclasses.field(default_factory=list)
    unexpected: Counter[str] = dataclasses.field(default_factory=Counter)
    state_checks: list[str] = dataclasses.field(default_factory=list)
    rss_before_kib: int = 0
    rss_after_kib: int = 0
    rss_peak_kib: int = 0
    server_errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.crashes or self.internal or self.violations)


def _short(request: Message | bytes) -> str:
    if isinstance(request, bytes):
        text = f"<raw {len(request)} bytes: {request[:40]!r}>"
    else:
        text = f"{type(request).__name__}({str(request).strip()!r})"
    return text if len(text) <= 300 else text[:300] + f"... ({len(text)} chars)"


class ServerErrors(logging.Handler):
    """Errors the stack logs: a task that stopped, an RPC answered INTERNAL."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = f"{record.name}: {record.getMessage()}"[:500]
        if record.exc_info and record.exc_info[1] is not None:
            frames = traceback.extract_tb(record.exc_info[2])[-3:]
            where = " <- ".join(
                f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[::-1]
            )
            line += f" | {record.exc_info[1]!r} at {where}"
        self.records.append(line)


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# ---- the fuzzer ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Call:
    phase: str
    role: str
    rpc: Rpc
    request: Message | bytes
    metadata: tuple[tuple[str, str], ...]
    forced_other: bool = False  # a member aimed at the other share on purpose


class Fuzzer:
    def __init__(self, stack: StackThread, world: World, seed: int, concurrency: int) -> None:
        self.stack = stack
        self.world = world
        self.rng = random.Random(seed)
        self.values = Values(self.rng, world)
        self.requests = Requests(self.values)
        self.concurrency = concurrency
        self.report = Report(by_role={r: Counter() for r in ROLES})
        self.member_writes: list[tuple[str, str, str]] = []  # (role, method, job_id)
        self.secrets = {s: [x.encode() for x in world.jobs[s] + world.names[s]] for s in SHARES}
        self._progress_at = 0

    async def run(self, total: int) -> Report:
        assert self.stack.credentials_dir is not None
        ca = LocalCredentials(self.stack.credentials_dir).ca.read_bytes()
        tls = grpc.ssl_channel_credentials(root_certificates=ca)
        options = [("grpc.max_send_message_length", 16 * 1024 * 1024)]
        async with grpc.aio.secure_channel(self.stack.address, tls, options=options) as channel:
            self.channel = channel
            await self.warm_cache()
            self.report.rss_before_kib = rss_kib()
            started = time.perf_counter()
            counts = [max(1, int(total * share)) for _, share in PHASES]
            counts[-1] = max(1, total - sum(counts[:-1]))  # the last phase takes the rest
            for (phase, _), count in zip(PHASES, counts, strict=True):
                self.report.by_phase[phase] = count
                if phase.startswith("refused"):
                    await self.refused_phase(phase, count)
                elif phase == "race":
                    await self.race_phase(count)
                else:
                    await self.run_calls(self.calls(phase, count))
                    await self.check_member_writes()
                await self.check_alive(phase)
            self.report.elapsed_s = time.perf_counter() - started
            await self.end_jobs()
        gc.collect()
        self.report.rss_after_kib = rss_kib()
        self.report.rss_peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return self.report

    # ---- calls ---------------------------------------------------------------------

    async def warm_cache(self) -> None:
        """Use the soon-expiring token while valid, then wait until it has expired."""
        (value,) = self.world.tokens["expired_cached"]
        stub = self.channel.unary_unary(
            "/qm.v1.Nodes/ListNodes",
            request_serializer=pb.ListNodesRequest.SerializeToString,
            response_deserializer=pb.ListNodesResponse.FromString,
        )
        await stub(pb.ListNodesRequest(), metadata=(("authorization", value),), timeout=10)
        claims = jwt.decode(value.split()[1], options={"verify_signature": False})
        await asyncio.sleep(max(0.0, claims["exp"] + 30 + 1.5 - time.time()))

    def metadata(self, role: str) -> tuple[tuple[str, str], ...]:
        value = self.values.pick(self.world.tokens[role])
        pairs: list[tuple[str, str]] = [] if not value else [("authorization", value)]
        if self.values.chance(0.01):
            pairs.append(("x-qm-min-seq", self.values.pick(MIN_SEQ_VALUES)))
        return tuple(pairs)

    def request_for(self, role: str, rpc: Rpc) -> Message | bytes:
        share = MEMBER_SHARE.get(role, self.values.pick(SHARES))
        roll = self.rng.random()
        if roll < 0.45:
            request = self.requests.generated(rpc.request.DESCRIPTOR)
        elif roll < 0.55:
            request = self.requests.valid(rpc, share)
        else:
            request = self.requests.mutated(self.requests.valid(rpc, share))
        if role in ("admin", "member_a", "member_b") and self.values.chance(0.01):
            return undecodable(self.rng, request)
        return request

    def calls(self, phase: str, count: int) -> Iterator[Call]:
        """Any caller, any RPC; callers who get past authorization twice as often as
        the refused phases gave them, so more requests reach the servicers."""
        weighted = (*ROLES, "admin", "admin", "member_a", "member_b")
        for _ in range(count):
            role = self.values.pick(weighted)
            rpc = self.values.pick(self.world.rpcs)
            yield Call(phase, role, rpc, self.request_for(role, rpc), self.metadata(role))

    def refused_calls(self, phase: str, count: int) -> Iterator[Call]:
        """Calls that must be refused, or are reads: none of them may write."""
        members = ("member_a", "member_b")
        for _ in range(count):
            role = self.values.pick(ROLES[:-1])  # everyone but admin
            rpc = self.values.pick(self.world.rpcs)
            if role in members and rpc.writes and rpc.member_may():
                request = self.aimed_at_other(role, rpc)
                yield Call(phase, role, rpc, request, self.metadata(role), forced_other=True)
                continue
            if role in members and rpc.member_may() and self.values.chance(0.5):
                request = self.aimed_at_other(role, rpc)
                yield Call(phase, role, rpc, request, self.metadata(role), forced_other=True)
                continue
            yield Call(phase, role, rpc, self.request_for(role, rpc), self.metadata(role))

    def aimed_at_other(self, role: str, rpc: Rpc) -> Message:
        """A request of `rpc` that names the other share or one of its jobs."""
        other = self.world.other(MEMBER_SHARE[role])
        request = self.requests.valid(rpc, other)
        if self.values.chance(0.5):
            request = self.requests.mutated(request)
        self._aim(request, other)
        return request

    def _aim(self, message: Message, other: str) -> None:
        other_ids = self.world.jobs[other]
        for field in message.DESCRIPTOR.fields:
            if field.name == "quota_share_name":
                setattr(message, field.name, other)
            elif field.name == "job_id":
                setattr(message, field.name, self.values.pick(other_ids))
            elif field.name == "job_ids":
                message.ClearField("job_ids")
                message.job_ids.append(self.values.pick(other_ids))
            elif field.name == "job_queue" and not getattr(message, field.name):
                setattr(message, field.name, QUEUE)
            elif field.name == "jobs":
                for item in message.jobs:
                    self._aim(item, other)

    async def run_calls(self, calls: Iterator[Call]) -> None:
        queue: asyncio.Queue[Call | None] = asyncio.Queue(maxsize=self.concurrency * 4)

        async def worker() -> None:
            while (call := await queue.get()) is not None:
                await self.one(call)

        workers = [asyncio.create_task(worker()) for _ in range(self.concurrency)]
        for call in calls:
            await queue.put(call)
        for _ in workers:
            await queue.put(None)
        await asyncio.gather(*workers)

    async def one(self, call: Call) -> None:
        rpc = call.rpc
        raw = isinstance(call.request, bytes)
        serialize = None if raw else rpc.request.SerializeToString
        code, details, reply = grpc.StatusCode.OK, "", b""
        try:
            if rpc.streaming:
                stream = self.channel.unary_stream(
                    rpc.path, request_serializer=serialize, response_deserializer=None
                )
                replies = stream(call.request, metadata=call.metadata, timeout=WATCH_TIMEOUT_S)
                async for item in replies:
                    reply += item
                    if len(reply) > 4096:
                        replies.cancel()
                        break
            else:
                unary = self.channel.unary_unary(
                    rpc.path, request_serializer=serialize, response_deserializer=None
                )
                reply = await unary(call.request, metadata=call.metadata, timeout=CALL_TIMEOUT_S)
        except grpc.aio.AioRpcError as err:
            code, details = err.code(), err.details() or ""
        except Exception as err:  # refused by the client library itself, never sent
            code, details = grpc.StatusCode.ABORTED, f"client-side: {err!r}"
        ended = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
        if rpc.streaming and code in ended and reply:
            code = grpc.StatusCode.OK  # items came: the watch was served (and cut by us)
        self.judge(call, code, details, reply)

    def judge(self, call: Call, code: grpc.StatusCode, details: str, reply: bytes) -> None:
        r = self.report
        r.sent += 1
        r.by_code[code.name] += 1
        r.by_role[call.role][code.name] += 1
        r.by_method[call.rpc.name] += 1
        if r.sent - self._progress_at >= 5000:
            self._progress_at = r.sent
            print(f"  ... {r.sent} sent ({call.phase}), codes so far: {dict(r.by_code)}")
        finding = Finding("", call.role, call.rpc.name, details[:200], _short(call.request))
        if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
            r.internal.append(dataclasses.replace(finding, kind=code.name))
            return
        if code == grpc.StatusCode.UNAVAILABLE and not details.startswith("try again"):
            r.crashes.append(dataclasses.replace(finding, kind="connection lost"))
            return
        if code == grpc.StatusCode.UNAVAILABLE:  # "try again": transient, counted by reason
            reason = "".join("#" if c.isdigit() else c for c in details[:70])
            r.unexpected[f"{call.rpc.name}: UNAVAILABLE {reason}"] += 1
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            what = "open, no item yet" if call.rpc.streaming else "DEADLINE_EXCEEDED"
            r.unexpected[f"{call.rpc.name}: {what}"] += 1
        problem = self.breach(call, code)
        if problem:
            r.violations.append(dataclasses.replace(finding, kind=problem))
        if call.role in MEMBER_SHARE:
            self.check_leak(call, reply + details.encode())
        if code == grpc.StatusCode.OK and call.role in MEMBER_SHARE:
            self.after_member_ok(call, reply)

    def breach(self, call: Call, code: grpc.StatusCode) -> str:
        """What is wrong with this outcome for this caller ("" = nothing)."""
        role, rpc = call.role, call.rpc
        if role in UNAUTHENTICATED_ROLES:
            if code == grpc.StatusCode.OK:
                return "accepted without valid credentials"
            if code != grpc.StatusCode.UNAUTHENTICATED:
                self.report.unexpected[f"{role}: {code.name}"] += 1
            return ""
        if code != grpc.StatusCode.OK:
            return ""
        if role == "no_roles":
            return "accepted for a token with no role"
        if role == "auditor" and rpc.writes:
            return "auditor's write accepted"
        if role in MEMBER_SHARE and not rpc.member_may():
            return "member called an RPC no member is granted"
        if call.forced_other and rpc.name not in ("SubmitServiceJobs", "GetJobQueueSnapshot"):
            return "member served on the other share"
        if call.phase.startswith("refused") and rpc.writes and rpc.name != "SubmitServiceJobs":
            return "write accepted in a refused-only phase"
        return ""

    def check_leak(self, call: Call, answer: bytes) -> None:
        """The other share's job ids and names must not reach a member (unless it sent them)."""
        other = self.world.other(MEMBER_SHARE[call.role])
        sent = call.request if isinstance(call.request, bytes) else call.request.SerializeToString()
        leaked = [s for s in self.secrets[other] if s in answer and s not in sent]
        if leaked:
            self.report.violations.append(
                Finding(
                    "leak",
                    call.role,
                    call.rpc.name,
                    f"the answer holds {other}'s {leaked[0].decode()!r}",
                    _short(call.request),
                )
            )

    def after_member_ok(self, call: Call, reply: bytes) -> None:
        role, rpc = call.role, call.rpc
        if not rpc.writes or isinstance(call.request, bytes):
            return
        # A submission answered without a job id created none (a dry run).
        if rpc.name == "SubmitServiceJob":
            job_id = pb.SubmitServiceJobResponse.FromString(reply).job_id
            if job_id:
                self.member_writes.append((role, rpc.name, job_id))
        elif rpc.name == "SubmitServiceJobs":
            for result in pb.SubmitServiceJobsResponse.FromString(reply).results:
                if result.HasField("job") and result.job.job_id:
                    self.member_writes.append((role, rpc.name, result.job.job_id))
        elif hasattr(call.request, "job_id"):
            job_id = arns.name_of(call.request.job_id)
            self.member_writes.append((role, rpc.name, job_id))

    # ---- phases --------------------------------------------------------------------

    async def refused_phase(self, phase: str, count: int) -> None:
        before_digest = await self.digest()
        before_seq = await self.requests_seq()
        await self.run_calls(self.refused_calls(phase, count))
        await self.check_member_writes()
        after_digest = await self.digest()
        after_seq = await self.requests_seq()
        line = (
            f"{phase}: last request envelope (audit table) seq {before_seq} -> {after_seq}, "
            f"read model digest {before_digest[:12]} -> {after_digest[:12]}"
        )
        self.report.state_checks.append(line)
        if after_seq != before_seq or after_digest != before_digest:
            self.report.violations.append(
                Finding("state changed by refused requests", "-", phase, line, "")
            )

    async def race_phase(self, count: int) -> None:
        """B submits with client tokens; A aims at the derived ids as they appear."""
        rounds = max(1, -(-count // 9))  # 9 calls a round: B's submit, A's 8 attacks
        b_meta = (("authorization", self.world.tokens["member_b"][0]),)
        rpcs = {r.name: r for r in self.world.rpcs}
        aims = ("TerminateServiceJob", "UpdateServiceJob", "UpdateWarmPool")
        for i in range(rounds):
            token = f"race-{self.rng.randrange(10**12)}"
            job_id = job_id_for_token(QUEUE, token)
            request = pb.SubmitServiceJobRequest(
                job_name=f"secret-B-race-{i}",
                job_queue=QUEUE,
                quota_share_name="B",
                service_request_payload=payload(),
                client_token=token,
            )
            attacks = []
            for k in range(8):
                rpc = rpcs[aims[k % len(aims)]]
                attack = self.requests.valid(rpc, "B")
                attack.job_id = job_id
                meta = self.metadata("member_a")
                attacks.append(Call("race", "member_a", rpc, attack, meta, forced_other=True))

            async def attack_all(calls: list[Call]) -> None:
                for c in calls:
                    await self.one(c)
                    await asyncio.sleep(0)

            b_call = Call("race", "member_b", rpcs["SubmitServiceJob"], request, b_meta)
            await asyncio.gather(self.one(b_call), attack_all(attacks[:4]), attack_all(attacks[4:]))
            self.world.jobs["B"].append(job_id)
            self.secrets["B"].append(job_id.encode())

    # ---- checks --------------------------------------------------------------------

    async def admin(self, method: str, request: Message, reply: type[Message]) -> Any:
        stub = self.channel.unary_unary(
            method,
            request_serializer=type(request).SerializeToString,
            response_deserializer=reply.FromString,
        )
        (value,) = self.world.tokens["admin"]
        return await stub(request, metadata=(("authorization", value),), timeout=30)

    async def requests_seq(self) -> int:
        """The log sequence of the newest request envelope (admission's writes), as the
        audit table holds it. Call after `digest`: its admin reads wait until the
        projection holds every envelope this admission appended."""
        stack = self.stack.stack
        conn = await asyncpg.connect(stack.postgres_url)
        try:
            seq = await conn.fetchval(
                f"SELECT coalesce(max(seq), 0) FROM {stack.settings.pg_schema}.audit "
                "WHERE subject = $1",
                self.world.request_subject,
            )
        finally:
            await conn.close()
        return int(seq)

    async def digest(self) -> str:
        """A digest of what only requests change: definitions, priorities, who ended jobs."""
        items: list[Any] = []
        envs = await self.admin(
            "/qm.v1.QuotaManagement/DescribeServiceEnvironments",
            pb.DescribeServiceEnvironmentsRequest(max_results=1000),
            pb.DescribeServiceEnvironmentsResponse,
        )
        for env in envs.service_environments:
            items.append(("env", env.service_environment_name, env.state, str(env.capacity_limits)))
        queues = await self.admin(
            "/qm.v1.QuotaManagement/DescribeJobQueues",
            pb.DescribeJobQueuesRequest(max_results=1000),
            pb.DescribeJobQueuesResponse,
        )
        for queue in queues.job_queues:
            items.append(("queue", str(queue)))
            shares = await self.admin(
                "/qm.v1.QuotaManagement/ListQuotaShares",
                pb.ListQuotaSharesRequest(job_queue=queue.job_queue_name, max_results=1000),
                pb.ListQuotaSharesResponse,
            )
            items.extend(("share", str(s)) for s in shares.quota_shares)
            token = ""
            while True:
                jobs = await self.admin(
                    "/qm.v1.ServiceJobs/ListServiceJobs",
                    pb.ListServiceJobsRequest(
                        job_queue=queue.job_queue_name,
                        max_results=100,
                        next_token=token,
                        all_statuses=True,
                    ),
                    pb.ListServiceJobsResponse,
                )
                for summary in jobs.job_summary_list:
                    detail = (
                        await self.admin(
                            "/qm.v1.ServiceJobs/DescribeServiceJob",
                            pb.DescribeServiceJobRequest(job_id=summary.job_id),
                            pb.DescribeServiceJobResponse,
                        )
                    ).job
                    items.append(
                        (
                            "job",
                            detail.job_id,
                            detail.quota_share_name,
                            detail.scheduling_priority,
                            detail.submitted_by,
                            detail.priority_updated_by,
                            detail.terminated_by,
                            sorted(detail.tags.items()),
                        )
                    )
                token = jobs.next_token
                if not token:
                    break
        nodes = await self.admin(
            "/qm.v1.Nodes/ListNodes", pb.ListNodesRequest(), pb.ListNodesResponse
        )
        items.extend(("node", n.host_id, n.state == pb.NODE_STATE_DRAINED) for n in nodes.nodes)
        text = json.dumps(sorted(items, key=repr), default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    async def check_member_writes(self) -> None:
        """Every write a member had accepted touched a job of its own share."""
        writes, self.member_writes = self.member_writes, []
        for role, method, job_id in writes:
            try:
                job = (
                    await self.admin(
                        "/qm.v1.ServiceJobs/DescribeServiceJob",
                        pb.DescribeServiceJobRequest(job_id=job_id),
                        pb.DescribeServiceJobResponse,
                    )
                ).job
                share = job.quota_share_name
            except grpc.aio.AioRpcError as err:
                share = f"<{err.code().name}>"
            if share != MEMBER_SHARE[role]:
                self.report.violations.append(
                    Finding(
                        "member wrote another share's job", role, method, f"{job_id} in {share}", ""
                    )
                )
            elif method.startswith("Submit"):
                self.world.jobs[share].append(job_id)
                self.secrets[share].append(job_id.encode())

    async def end_jobs(self, timeout: float = 60.0) -> None:
        """Terminate every job and wait until none runs: the process runtime keeps a
        job's processes alive when its agent stops (they resume on the next start)."""
        live = (pb.JOB_STATUS_SCHEDULED, pb.JOB_STATUS_STARTING, pb.JOB_STATUS_RUNNING)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = 0
            queues = await self.admin(
                "/qm.v1.QuotaManagement/DescribeJobQueues",
                pb.DescribeJobQueuesRequest(max_results=1000),
                pb.DescribeJobQueuesResponse,
            )
            # One list per unfinished status (ListServiceJobs pages at most 100, newest
            # first): ended jobs never crowd out the ones still to terminate.
            listed = []
            for queue in queues.job_queues:
                for status in (pb.JOB_STATUS_RUNNABLE, *live):
                    jobs = await self.admin(
                        "/qm.v1.ServiceJobs/ListServiceJobs",
                        pb.ListServiceJobsRequest(
                            job_queue=queue.job_queue_name, job_status=status, max_results=100
                        ),
                        pb.ListServiceJobsResponse,
                    )
                    listed.extend(jobs.job_summary_list)
            for job in listed:
                if job.status in live:
                    running += 1
                with contextlib.suppress(grpc.aio.AioRpcError):  # ended meanwhile
                    await self.admin(
                        "/qm.v1.ServiceJobs/TerminateServiceJob",
                        pb.TerminateServiceJobRequest(job_id=job.job_id, reason="fuzz over"),
                        pb.TerminateServiceJobResponse,
                    )
            if not running:
                return
            await asyncio.sleep(0.5)

    async def check_alive(self, phase: str) -> None:
        health = health_pb2_grpc.HealthStub(self.channel)
        try:
            reply = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
            nodes = await self.admin(
                "/qm.v1.Nodes/ListNodes", pb.ListNodesRequest(), pb.ListNodesResponse
            )
        except grpc.aio.AioRpcError as err:
            self.report.crashes.append(Finding("server down", "-", phase, str(err.code()), ""))
            return
        if reply.status != health_pb2.HealthCheckResponse.SERVING:
            self.report.crashes.append(Finding("not serving", "-", phase, str(reply.status), ""))
        newest = max((n.last_heartbeat_at for n in nodes.nodes), default=0)
        if time.time() * 1000 - newest > 15_000:
            self.report.crashes.append(
                Finding("node agents silent", "-", phase, f"last heartbeat {newest}", "")
            )
        if not self.stack._thread.is_alive():
            self.report.crashes.append(Finding("stack thread died", "-", phase, "", ""))


# ---- running and printing -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Options:
    requests: int = 100_000
    seed: int = 1
    concurrency: int = 32


def run(options: Options) -> Report:
    """Start a secured stack, fuzz it, stop it; the report of the run."""
    errors = ServerErrors()
    logging.getLogger().addHandler(errors)
    try:
        with tempfile.TemporaryDirectory(prefix="qm-fuzz-") as tmp:
            settings = StackSettings(
                data_dir=Path(tmp) / "data",
                nodes=2,
                grpc_port=0,
                stop_grace_seconds=2,
                heartbeat_seconds=1,
                tick_seconds=1,
            )
            with StackThread(settings) as stack:
                world = setup(stack)
                fuzzer = Fuzzer(stack, world, options.seed, options.concurrency)
                report = asyncio.run(fuzzer.run(options.requests))
    finally:
        logging.getLogger().removeHandler(errors)
    report.server_errors = errors.records
    for record in errors.records:
        if "stopped:" in record:  # a service task of the stack died
            report.crashes.append(Finding("server task died", "-", "-", record, ""))
    return report


def print_report(report: Report, options: Options) -> None:
    rate = report.sent / report.elapsed_s if report.elapsed_s else 0.0
    print(
        f"\nrequests sent: {report.sent} in {report.elapsed_s:.1f} s ({rate:.0f}/s), "
        f"seed {options.seed}, {options.concurrency} in flight"
    )
    print("per phase: " + ", ".join(f"{k} {v}" for k, v in report.by_phase.items()))
    print("per status: " + ", ".join(f"{k} {v}" for k, v in report.by_code.most_common()))
    print("per role:")
    for role, codes in report.by_role.items():
        total = sum(codes.values())
        print(f"  {role:15s} {total:7d}  " + ", ".join(f"{k} {v}" for k, v in codes.most_common()))
    print(
        f"RPCs covered: {len(report.by_method)} "
        f"({', '.join(f'{k} {v}' for k, v in sorted(report.by_method.items()))})"
    )
    for line in report.state_checks:
        print(f"state: {line}")
    if report.unexpected:
        print(
            "unexpected but harmless outcomes: "
            + ", ".join(f"{k} x{v}" for k, v in report.unexpected.most_common(10))
        )
    print(
        f"memory (RSS of this process: the in-process stack and the fuzzer): "
        f"{report.rss_before_kib / 1024:.0f} MiB before, {report.rss_after_kib / 1024:.0f} MiB "
        f"after, peak {report.rss_peak_kib / 1024:.0f} MiB"
    )
    for title, findings in (
        ("crashes", report.crashes),
        ("INTERNAL/UNKNOWN", report.internal),
        ("violations", report.violations),
    ):
        kinds = Counter(f"{f.kind} ({f.role} {f.method})" for f in findings)
        print(f"{title}: {len(findings)}")
        for kind, n in kinds.most_common(12):
            print(f"  x{n} {kind}")
        for finding in findings[:SHOW]:
            print(f"  {finding.line()}")
    if report.server_errors:
        print(f"server error log lines: {len(report.server_errors)}")
        for line in report.server_errors[:SHOW]:
            print(f"  {line}")
    print("RESULT: " + ("clean" if report.clean else "FINDINGS"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    options = Options(requests=args.requests, seed=args.seed, concurrency=args.concurrency)
    logging.getLogger().setLevel(logging.ERROR)  # collected by `ServerErrors`, then printed
    report = run(options)
    print_report(report, options)
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
