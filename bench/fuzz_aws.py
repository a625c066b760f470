"""Fuzz admission's AWS-compatible endpoint (Batch, SageMaker, IAM, STS) over HTTP.

Starts admission in-process with its HTTP endpoint (`aws_admission`: nats-server and
Postgres of its own under a temp dir, one admin access key), makes queue `q` with
share `QS1` through the endpoint and sends `--requests` hostile HTTP requests, most signed correctly
with botocore's `SigV4Auth` so they get past authentication:
- every member of every Batch operation in botocore's service model, one at a time,
  given a value of the wrong JSON type (a valid-looking request around it), also
  inside nested structures, lists and maps;
- Batch operations Quartermaster does not serve, unknown paths and methods;
- malformed JSON (truncated, not an object, invalid UTF-8, deep nesting, NaN and
  Infinity, integers of thousands of digits), huge strings, odd unicode, bodies over
  the size limit, headers over the HTTP layer's limit;
- SageMaker `X-Amz-Target` junk and junk members for the four training-job actions;
- IAM and STS form junk (unknown actions, bad encodings, missing members);
- requests unsigned or badly signed (wrong secret, unknown key, stale or future date,
  another service's scope, a body changed after signing, garbage headers).

Phases: `refused` (50%) sends only requests that must be refused and reads the log's
last seq before and after each; `mixed` (40%) sends anything, valid requests with
mutated strings and numbers too, and checks a refused request's seq only where no
accepted request overlapped it in time; `refused_again` (10%) as the first, on the
state the mixed phase left.

Prints requests, rates, counts per status, per kind of request and per protocol, and
the findings: crashes (a connection error, a server exception logged, the endpoint
not answering afterwards), 5xx answers, state changes by refused requests, requests
that must be refused but were accepted, and refusals not in AWS's error shape (JSON
`__type` and `message` with `x-amzn-ErrorType` for Batch and SageMaker, an XML
`ErrorResponse` for IAM and STS). Exit status 1 if any.

    python bench/fuzz_aws.py [--requests 20000] [--seed 1] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import itertools
import json
import logging
import random
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import quote

import aiohttp
import botocore.session
from aiohttp.http_exceptions import HttpProcessingError
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.model import Shape, StructureShape
from yarl import URL

from quartermaster.bus import JetStreamLog

REGION = "us-east-1"
QUEUE = "q"
SHARE = "QS1"
UNIT = "ml.p5.48xlarge"
MAX_BODY_BYTES = 2 * 1024 * 1024  # the endpoint's limit (`qm_admission.aws.server`)
PHASES = (("refused", 0.50), ("mixed", 0.40), ("refused_again", 0.10))
FORM = "application/x-www-form-urlencoded; charset=utf-8"
JSON_11 = "application/x-amz-json-1.1"
CALL_TIMEOUT_S = 30.0
SHOW = 5
# Operations this endpoint serves (`qm_admission.aws.batch`); botocore knows more.
SERVED = frozenset(
    {
        "SubmitServiceJob",
        "DescribeServiceJob",
        "ListServiceJobs",
        "UpdateServiceJob",
        "TerminateServiceJob",
        "GetJobQueueSnapshot",
        "CreateServiceEnvironment",
        "DescribeServiceEnvironments",
        "UpdateServiceEnvironment",
        "DeleteServiceEnvironment",
        "CreateSchedulingPolicy",
        "ListSchedulingPolicies",
        "DescribeSchedulingPolicies",
        "UpdateSchedulingPolicy",
        "DeleteSchedulingPolicy",
        "CreateJobQueue",
        "DescribeJobQueues",
        "UpdateJobQueue",
        "DeleteJobQueue",
        "CreateQuotaShare",
        "DescribeQuotaShare",
        "ListQuotaShares",
        "UpdateQuotaShare",
        "DeleteQuotaShare",
        "TagResource",
        "UntagResource",
        "ListTagsForResource",
    }
)
PAYLOAD = {
    "TrainingJobName": "fz",
    "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
    "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
    "ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1, "VolumeSizeInGB": 30},
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}
ODD_STRINGS = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\u202eevil",
    "\ud7ff\ue000\uffff",
    "😀" * 50,
    "\u0000\u001f\u007f",
    "../../etc/passwd",
    "arn:aws:batch:us-east-1:000000000000:job-queue/q",
    "arn:aws:batch:us-east-1:000000000000:job/" + "f" * 32,
    "q/QS1",
    "%00%ff",
    "<xml>&amp;</xml>",
    "${jndi:ldap://x}",
    "'; DROP TABLE jobs; --",
    "Ä" * 1000,
    "x" * 100_000,
    "\\u0000",
    "\r\n\r\nHTTP/1.1 200 OK",
)
HUGE_NUMBERS = (2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 2**31, -(2**31) - 1)


# ---- requests --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Probe:
    """One HTTP request to send, and what must come of it."""

    kind: str  # the generator: "wrong-type", "malformed-json", "bad-signature", ...
    label: str  # what it aims at: an operation and member, an action
    method: str
    path: str  # as sent: percent-encoded, with the query
    body: bytes
    headers: dict[str, str]
    service: str  # the SigV4 scope's service
    signing: str = "good"  # good, none, or how it is spoiled
    must_refuse: bool = True

    @property
    def family(self) -> str:
        """Which protocol's error shape the answer must have (the endpoint's rule)."""
        if self.headers.get("X-Amz-Target", "").startswith("SageMaker."):
            return "sagemaker"
        if self.path.startswith("/v1/"):
            return "batch"
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        return "query" if content_type == "application/x-www-form-urlencoded" else "batch"

    def short(self) -> str:
        body = self.body[:120]
        more = f"... ({len(self.body)} bytes)" if len(self.body) > 120 else ""
        target = self.headers.get("X-Amz-Target", "")
        head = f"{self.method} {self.path[:120]}" + (f" [{target[:60]}]" if target else "")
        return f"{head} {self.signing} {body!r}{more}"


class BatchModel:
    """botocore's Batch operations: paths, input members, values of the right type."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.model = botocore.session.get_session().get_service_model("batch")
        self.operations = list(self.model.operation_names)
        self.served = [name for name in self.operations if name in SERVED]

    def http(self, operation: str) -> tuple[str, str]:
        op = self.model.operation_model(operation)
        return op.http["method"], op.http["requestUri"]

    def members(self, operation: str) -> dict[str, Shape]:
        shape = self.model.operation_model(operation).input_shape
        if shape is None:
            return {}
        return {
            name: member
            for name, member in shape.members.items()
            if member.serialization.get("location") is None  # body members only
        }

    def value(self, shape: Shape, depth: int = 0) -> Any:
        """A value of `shape`'s type (enum values as listed, names this stack knows)."""
        kind = shape.type_name
        if kind == "string":
            enum = getattr(shape, "enum", None) or []
            return self.rng.choice(enum) if enum else self.rng.choice(("q", "QS1", "fz", "env"))
        if kind in ("integer", "long"):
            return self.rng.choice((0, 1, 2, 100))
        if kind in ("double", "float"):
            return 1.5
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "timestamp":
            return int(time.time())
        if depth > 3:
            return {} if kind in ("structure", "map") else []
        if kind == "list":
            return [self.value(shape.member, depth + 1)]
        if kind == "map":
            return {"k": self.value(shape.value, depth + 1)}
        if isinstance(shape, StructureShape):
            return {
                name: self.value(member, depth + 1)
                for name, member in shape.members.items()
                if name in shape.required_members or self.rng.random() < 0.5
            }
        return "x"

    def body(self, operation: str) -> dict[str, Any]:
        """A request of the right types: required members and about half the others."""
        shape = self.model.operation_model(operation).input_shape
        required = set(shape.required_members) if shape is not None else set()
        return {
            name: self.value(member)
            for name, member in self.members(operation).items()
            if name in required or self.rng.random() < 0.5
        }

    def member_paths(self, shape: Shape, prefix: tuple[Any, ...] = ()) -> Iterator[Any]:
        """(path, shape) of every member under `shape`: keys, list index 0, map key "k"."""
        kind = shape.type_name
        if len(prefix) > 6:
            return
        if isinstance(shape, StructureShape):
            for name, member in shape.members.items():
                if member.serialization.get("location") is not None:
                    continue
                yield (*prefix, name), member
                yield from self.member_paths(member, (*prefix, name))
        elif kind == "list":
            yield from self.member_paths(shape.member, (*prefix, 0))
        elif kind == "map":
            yield from self.member_paths(shape.value, (*prefix, "k"))


def wrong_values(shape: Shape) -> tuple[Any, ...]:
    """JSON values of any type but `shape`'s (never null: null is as if absent)."""
    kind = shape.type_name
    if kind == "string":
        return (1, -1.5, True, False, [], {}, ["x"], {"a": "b"}, 2**70)
    if kind in ("integer", "long"):
        return ("1", "", 1.5, True, False, [], {}, [1], {"a": 1}, float("nan"), float("inf"))
    if kind in ("double", "float"):
        return ("1.5", True, [], {}, [1.5])
    if kind == "boolean":
        return ("true", "false", 0, 1, [], {}, [True])
    if kind == "list":
        return ("x", "", 1, True, {}, {"a": 1})
    if kind == "map":
        return ("x", "", 1, True, [], ["k"], [["k", "v"]])
    if kind == "structure":
        return ("x", "", 1, True, [], [{}])
    return (1, [], {})


def put(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set `value` at `path` in `body` (keys, list index 0, map key "k"), making the
    containers on the way."""
    node: Any = body
    for step, following in itertools.pairwise(path):
        kind = list if isinstance(following, int) else dict
        if isinstance(node, list):
            if not node:
                node.append(None)
            if not isinstance(node[step], kind):
                node[step] = kind()
        elif not isinstance(node.get(step), kind):
            node[step] = kind()
        node = node[step]
    if isinstance(node, list) and not node:
        node.append(None)
    node[path[-1]] = value


def dumps(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


class Probes:
    """Generators of hostile requests; `must_refuse` ones and anything else."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.batch = BatchModel(rng)
        self.big = b'{"jobName": "' + b"x" * (MAX_BODY_BYTES + 1024) + b'"}'

    # -- building blocks
    def _json(
        self,
        kind: str,
        label: str,
        path: str,
        body: bytes,
        *,
        method: str = "POST",
        must_refuse: bool = True,
        headers: dict[str, str] | None = None,
        service: str = "batch",
    ) -> Probe:
        sent = {"Content-Type": "application/json", **(headers or {})}
        return Probe(kind, label, method, path, body, sent, service, must_refuse=must_refuse)

    def _operation_path(self, operation: str) -> tuple[str, str]:
        method, uri = self.batch.http(operation)
        arn = f"arn:aws:batch:{REGION}:000000000000:job-queue/{QUEUE}"
        return method, uri.replace("{resourceArn}", quote(arn, safe=""))

    def _submit(self, name: str | None = None) -> dict[str, Any]:
        name = name or f"fz-{self.rng.getrandbits(48):012x}"
        return {
            "jobName": name,
            "jobQueue": QUEUE,
            "serviceJobType": "SAGEMAKER_TRAINING",
            "quotaShareName": SHARE,
            "serviceRequestPayload": json.dumps({**PAYLOAD, "TrainingJobName": name}),
        }

    # -- must be refused
    def wrong_type(self) -> Probe:
        operation = self.rng.choice(self.batch.operations)
        shape = self.batch.model.operation_model(operation).input_shape
        paths = list(self.batch.member_paths(shape)) if shape is not None else []
        method, path = self._operation_path(operation)
        if not paths or method != "POST":
            return self.unknown_operation()
        member_path, member = self.rng.choice(paths)
        body = self._submit() if operation == "SubmitServiceJob" else self.batch.body(operation)
        value = self.rng.choice(wrong_values(member))
        put(body, member_path, value)
        label = f"{operation}.{'.'.join(map(str, member_path))}={type(value).__name__}"
        return self._json("wrong-type", label, path, dumps(body))

    def unknown_operation(self) -> Probe:
        rng = self.rng
        choice = rng.randrange(6)
        if choice == 0:  # an operation of Batch this endpoint does not serve
            operation = rng.choice([o for o in self.batch.operations if o not in SERVED])
            method, path = self._operation_path(operation)
            return self._json(
                "unknown-op", operation, path, dumps(self.batch.body(operation)), method=method
            )
        if choice == 1:  # a served path, another method
            operation = rng.choice([o for o in self.batch.served if not o.endswith("Resource")])
            _, path = self._operation_path(operation)
            method = rng.choice(("GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"))
            return self._json("wrong-method", f"{method} {operation}", path, b"{}", method=method)
        if choice == 2:  # the tags route with another method
            _, path = self._operation_path("TagResource")
            method = rng.choice(("PUT", "PATCH", "OPTIONS"))
            body = b'{"tags": {"a": "b"}}'
            return self._json("wrong-method", f"{method} tags", path, body, method=method)
        paths = (
            "/",
            "/v1",
            "/v1/",
            "/v2/submitservicejob",
            "/v1/submitservicejob/extra",
            "/v1/tags",
            "/v1/tags/",
            "/V1/SUBMITSERVICEJOB/..",
            "/v1/%2e%2e/v1/submitservicejob",
            "/v1/submit%00servicejob",
            "/v1/%ff%fe",
            "/v1/" + "a" * 4000,
            "/v1/%E2%80%AE",
            "//v1//submitservicejob",
            "/v1/submitservicejob;x=1",
            "/v1/listservicejobs?" + "a=1&" * 200,
        )
        path = rng.choice(paths)
        return self._json("unknown-path", path[:40], path, dumps(self._submit()))

    def malformed_json(self) -> Probe:
        rng = self.rng
        operation = rng.choice(self.batch.served)
        method, path = self._operation_path(operation)
        if method != "POST":
            operation, path = "SubmitServiceJob", "/v1/submitservicejob"
        valid = dumps(self._submit()) if operation == "SubmitServiceJob" else b"{}"
        depth = rng.choice((100, 1000, 5000, 100_000))
        bodies = (
            valid[: rng.randrange(1, max(2, len(valid)))],  # truncated
            b"[]",
            b'"text"',
            b"1",
            b"null",
            b"true",
            b"\xff\xfe{}",
            b'{"jobName": "\xc3\x28"}',  # invalid UTF-8
            b'{"jobName": "\\ud800"}',  # a lone surrogate
            b"{'jobName': 'x'}",
            b'{"jobName": "a",}',
            b'{"jobName": NaN}',
            b'{"schedulingPriority": Infinity, "jobName": "x"}',
            b'{"schedulingPriority": -Infinity}',
            b'{"schedulingPriority": 1e999}',
            b'{"schedulingPriority": ' + b"9" * 5000 + b"}",
            b'{"schedulingPriority": 1' + b"0" * 400 + b"}",
            b'{"jobName": ' + b"[" * depth + b"]" * depth + b"}",
            b'{"tags": ' + b'{"a":' * depth + b"1" + b"}" * depth + b"}",
            b"[" * depth,
            b'{"jobName": "x", "jobName": 5}',  # a duplicate key
            b"{}" * 3,
            b"\x00" * 64,
            b" " * 10_000,
        )
        return self._json("malformed-json", operation, path, rng.choice(bodies))

    def oversize(self) -> Probe:
        operation = self.rng.choice(("SubmitServiceJob", "CreateServiceEnvironment"))
        _, path = self._operation_path(operation)
        return self._json("oversize", operation, path, self.big)

    def bad_signature(self) -> Probe:
        """A request that would write if it were signed right."""
        probe = self._json("bad-signature", "SubmitServiceJob", "/v1/submitservicejob", b"")
        probe = dataclasses.replace(probe, body=dumps(self._submit()))
        how = self.rng.choice(
            (
                "none",
                "wrong-secret",
                "unknown-key",
                "stale",
                "future",
                "other-service",
                "body-changed",
                "garbage",
                "uppercase-signature",
                "unsigned-host",
                "date-changed",
                "path-changed",
            )
        )
        return dataclasses.replace(probe, signing=how, label=f"SubmitServiceJob/{how}")

    def sagemaker_junk(self) -> Probe:
        rng = self.rng
        action = rng.choice(
            (
                "DescribeTrainingJob",
                "StopTrainingJob",
                "UpdateTrainingJob",
                "ListTrainingJobs",
                "CreateTrainingJob",
                "",
                "describeTrainingJob",
                "DescribeTrainingJob ",
                "ListTrainingJobs.Extra",
                "x" * 2000,
                "Ünïcödé",
            )
        )
        target = f"SageMaker.{action}"
        names: tuple[Any, ...] = (
            5,
            None,
            [],
            {},
            "",
            "nope",
            "x-zzzzzzzz-1",
            "fz-00000000-1",
            "fz-00000000-99999999999999999999",
            "a" * 10_000 + "-00000000-1",
            "😀-deadbeef-0",
        )
        data: Any = {"TrainingJobName": rng.choice(names)}
        if action.startswith("ListTrainingJobs"):
            data = rng.choice(
                (
                    {"MaxResults": "10"},
                    {"MaxResults": 0},
                    {"MaxResults": 10**30},
                    {"MaxResults": True},
                    {"NextToken": rng.choice(("junk", "x" * 5000, 5, "AAAA", "=="))},
                    {"SortBy": "Size"},
                    {"SortOrder": 1},
                    {"StatusEquals": "Done"},
                    {"CreationTimeAfter": "yesterday"},
                    {"Unknown": 1},
                    {"NameContains": ["a"]},
                )
            )
        elif action == "UpdateTrainingJob":
            data["ResourceConfig"] = rng.choice(
                (
                    {},
                    [],
                    "x",
                    {"KeepAlivePeriodInSeconds": "60"},
                    {"KeepAlivePeriodInSeconds": 2**70},
                )
            )
        bodies = (dumps(data), b"{", b"[]", b'{"TrainingJobName": NaN}')
        body = rng.choice(bodies if action == "ListTrainingJobs" else (*bodies, b""))
        headers = {"Content-Type": JSON_11, "X-Amz-Target": target}
        # StopTrainingJob and UpdateTrainingJob of a job that does not exist: refused too.
        return Probe("sagemaker-junk", action[:40], "POST", "/", body, headers, "sagemaker")

    def query_junk(self) -> Probe:
        rng = self.rng
        service = rng.choice(("iam", "sts"))
        bodies = (
            "",
            "Action=",
            "Action=DeleteRole&RoleName=x",
            "Action=CreateUser&UserName=x&Version=2010-05-08",
            "Action=GetRole",
            "Action=GetRole&RoleName=",
            "Action=SimulatePrincipalPolicy&PolicySourceArn=x",
            "Action=SimulatePrincipalPolicy&ActionNames.member.1=s3:GetObject",
            "Action=AssumeRole&RoleArn=x&RoleSessionName=y",
            "Action=%ZZ",
            "Action=GetCallerIdentity%00",
            "Action=Get%C0%AFRole",
            "=&&&=&",
            "Action" + "=x" * 1000,
            "Action=" + "A" * 50_000,
        )
        body = rng.choice(bodies).encode()
        if rng.random() < 0.1:
            body = b"Action=GetRole&RoleName=\xff\xfe"  # not UTF-8
        headers = {"Content-Type": FORM}
        return Probe(
            "query-junk", body[:40].decode(errors="replace"), "POST", "/", body, headers, service
        )

    def http_layer(self) -> Probe:
        """A header over aiohttp's 8190-byte line limit: refused before any handler."""
        probe = self._json("http-layer", "long header", "/v1/listservicejobs", b"{}")
        headers = {**probe.headers, "X-Junk": "a" * 9000}
        return dataclasses.replace(probe, headers=headers)

    # -- anything (may be accepted)
    def mutated_valid(self) -> Probe:
        """A valid request with one string or number swapped for a hostile one of its type."""
        rng = self.rng
        choice = rng.randrange(5)
        if choice == 0:
            body = self._submit()
            member = rng.choice(list(body))
            body[member] = rng.choice(ODD_STRINGS)
            return self._json(
                "mutated-valid",
                f"SubmitServiceJob.{member}",
                "/v1/submitservicejob",
                dumps(body),
                must_refuse=False,
            )
        if choice == 1:
            body = self._submit()
            body[rng.choice(("schedulingPriority", "retryStrategy", "timeoutConfig"))] = rng.choice(
                HUGE_NUMBERS
            )
            return self._json(
                "mutated-valid",
                "SubmitServiceJob number",
                "/v1/submitservicejob",
                dumps(body),
                must_refuse=False,
            )
        if choice == 2:
            operation = rng.choice(self.batch.served)
            method, path = self._operation_path(operation)
            body = self.batch.body(operation)
            for member, shape in self.batch.members(operation).items():
                if shape.type_name == "string" and rng.random() < 0.5:
                    body[member] = rng.choice(ODD_STRINGS)
                elif shape.type_name in ("integer", "long") and rng.random() < 0.5:
                    body[member] = rng.choice(HUGE_NUMBERS)
            data = dumps(body) if method in ("POST",) else b""
            return self._json(
                "mutated-valid", operation, path, data, method=method, must_refuse=False
            )
        if choice == 3:
            members: dict[str, Any] = {
                "NameContains": rng.choice(ODD_STRINGS),
                "MaxResults": rng.randrange(1, 101),
                "SortOrder": "Descending",
                "CreationTimeAfter": rng.choice((float("nan"), float("inf"), -1e308, 0)),
            }
            member = rng.choice(list(members))
            query = {member: members[member]}
            headers = {"Content-Type": JSON_11, "X-Amz-Target": "SageMaker.ListTrainingJobs"}
            return Probe(
                "mutated-valid",
                f"ListTrainingJobs.{member}",
                "POST",
                "/",
                dumps(query),
                headers,
                "sagemaker",
                must_refuse=False,
            )
        action = rng.choice(("GetCallerIdentity", "GetRole", "SimulatePrincipalPolicy"))
        odd = quote(rng.choice(ODD_STRINGS)[:5000])
        form = {
            "GetCallerIdentity": f"Action=GetCallerIdentity&Version=2011-06-15&Extra={odd}",
            "GetRole": f"Action=GetRole&Version=2010-05-08&RoleName={odd or 'x'}",
            "SimulatePrincipalPolicy": (
                f"Action=SimulatePrincipalPolicy&PolicySourceArn={odd or 'x'}"
                f"&ActionNames.member.1=s3:{odd}&ResourceArns.member.1={odd}"
            ),
        }[action]
        service = "sts" if action == "GetCallerIdentity" else "iam"
        return Probe(
            "mutated-valid",
            action,
            "POST",
            "/",
            form.encode(),
            {"Content-Type": FORM},
            service,
            must_refuse=False,
        )

    def refused(self) -> Probe:
        generators: tuple[tuple[Callable[[], Probe], int], ...] = (
            (self.wrong_type, 40),
            (self.unknown_operation, 10),
            (self.malformed_json, 15),
            (self.oversize, 1),
            (self.bad_signature, 12),
            (self.sagemaker_junk, 10),
            (self.query_junk, 10),
            (self.http_layer, 1),
        )
        make = self.rng.choices([g for g, _ in generators], [w for _, w in generators])[0]
        return make()

    def anything(self) -> Probe:
        return self.mutated_valid() if self.rng.random() < 0.4 else self.refused()


# ---- signing and sending -----------------------------------------------------------


class Signer:
    """Headers for a probe: botocore's SigV4 with the admin key, or spoiled as it says."""

    def __init__(self, url: str, key: str, secret: str) -> None:
        self.url = url
        self.key = key
        self.secret = secret

    def __call__(self, probe: Probe) -> tuple[str, bytes, dict[str, str]]:
        """The path, body and headers to send."""
        how = probe.signing
        path, body = probe.path, probe.body
        if how == "none":
            return path, body, dict(probe.headers)
        key = "QMAKUNKNOWNKEY000000" if how == "unknown-key" else self.key
        secret = self.secret + "x" if how == "wrong-secret" else self.secret
        service = "s3" if how == "other-service" else probe.service
        request = AWSRequest(
            method=probe.method, url=self.url + path, data=body, headers=dict(probe.headers)
        )
        auth = SigV4Auth(Credentials(key, secret), service, REGION)
        if how in ("stale", "future"):
            shift = dt.timedelta(minutes=-16 if how == "stale" else 16)
            when = dt.datetime.now(dt.UTC).replace(tzinfo=None) + shift
            with mock.patch("botocore.auth.get_current_datetime", return_value=when):
                auth.add_auth(request)
        else:
            auth.add_auth(request)
        headers = {k: str(v) for k, v in request.headers.items()}
        authorization = headers.get("Authorization", "")
        if how == "body-changed":
            body = body.replace(b'"jobQueue": "q"', b'"jobQueue": "q", "schedulingPriority": 9')
        elif how == "garbage":
            headers["Authorization"] = self_garbage(authorization)
        elif how == "uppercase-signature":
            head, _, signature = authorization.rpartition("Signature=")
            headers["Authorization"] = head + "Signature=" + signature.upper()
        elif how == "unsigned-host":
            headers["Authorization"] = authorization.replace("host;", "").replace(";host", "")
        elif how == "date-changed":
            stamp = dt.datetime.strptime(headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
            headers["X-Amz-Date"] = (stamp + dt.timedelta(seconds=1)).strftime("%Y%m%dT%H%M%SZ")
        elif how == "path-changed":
            path = "/v1/SubmitServiceJob"
        return path, body, headers


def self_garbage(authorization: str) -> str:
    choices = (
        "AWS4-HMAC-SHA256",
        "Bearer x",
        authorization.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA512"),
        authorization.replace("aws4_request", "aws5_request"),
        authorization.replace("Credential=", "Credential=a/b/"),
        authorization + ", Extra=1",
        authorization.replace("SignedHeaders=", "SignedHeaders=x-amz-date;host;"),
        " " * 100,
        "AWS4-HMAC-SHA256 Credential=" + "/" * 500,
    )
    return random.choice(choices)


# ---- outcomes --------------------------------------------------------------------


@dataclasses.dataclass
class Finding:
    kind: str
    status: int
    detail: str
    request: str

    def line(self) -> str:
        return f"[{self.kind}] {self.status}: {self.detail} | request: {self.request}"


@dataclasses.dataclass
class Report:
    sent: int = 0
    elapsed_s: float = 0.0
    by_status: Counter[int] = dataclasses.field(default_factory=Counter)
    by_kind: dict[str, Counter[int]] = dataclasses.field(default_factory=dict)
    by_family: Counter[str] = dataclasses.field(default_factory=Counter)
    by_phase: dict[str, int] = dataclasses.field(default_factory=dict)
    members_wrong_typed: set[str] = dataclasses.field(default_factory=set)
    crashes: list[Finding] = dataclasses.field(default_factory=list)
    server_errors_5xx: list[Finding] = dataclasses.field(default_factory=list)
    state_changes: list[Finding] = dataclasses.field(default_factory=list)
    accepted: list[Finding] = dataclasses.field(default_factory=list)  # must be refused
    not_aws_shape: list[Finding] = dataclasses.field(default_factory=list)
    refused_checked: int = 0  # refused requests whose seq was read before and after
    refused_unattributable: int = 0  # an accepted request overlapped it
    http_layer: int = 0  # refused by aiohttp's HTTP parser, before the handler
    bad_http_logged: int = 0  # of which aiohttp logged at ERROR with a traceback
    unsendable: int = 0  # the client library would not send it (a header it refuses)
    server_errors: list[str] = dataclasses.field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (
            self.crashes
            or self.server_errors_5xx
            or self.state_changes
            or self.accepted
            or self.not_aws_shape
        )


class ServerErrors(logging.Handler):
    """Errors the server logs: an exception in a handler, aiohttp's own."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []
        self.bad_http = 0

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if record.name == "aiohttp.server" and isinstance(error, HttpProcessingError):
            self.bad_http += 1  # aiohttp refused a malformed request (400), logged it
            return
        line = f"{record.name}: {record.getMessage()}"[:500]
        if record.exc_info and record.exc_info[1] is not None:
            frames = traceback.extract_tb(record.exc_info[2])[-3:]
            where = " <- ".join(
                f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[::-1]
            )
            line += f" | {record.exc_info[1]!r} at {where}"
        self.records.append(line)


def shape_problem(family: str, status: int, headers: Any, body: bytes) -> str | None:
    """Why an answer is not in AWS's shape for its protocol (None: it is)."""
    if status >= 400:
        if family == "query":
            try:
                root = ET.fromstring(body)
            except ET.ParseError as err:
                return f"not XML: {err}"
            tag = root.tag.rsplit("}", 1)[-1]
            ns = root.tag[: -len(tag)]
            code = root.findtext(f"{ns}Error/{ns}Code")
            message = root.findtext(f"{ns}Error/{ns}Message")
            if tag != "ErrorResponse" or not code or message is None:
                return f"not an ErrorResponse with Code and Message: {body[:200]!r}"
            return None
        try:
            data = json.loads(body)
        except ValueError as err:
            return f"not JSON: {err}"
        if not isinstance(data, dict) or not isinstance(data.get("__type"), str):
            return f"no __type: {body[:200]!r}"
        if not isinstance(data.get("message"), str):
            return f"no message: {body[:200]!r}"
        if headers.get("x-amzn-ErrorType") != data["__type"]:
            return f"x-amzn-ErrorType {headers.get('x-amzn-ErrorType')!r} != {data['__type']!r}"
        if status not in (400, 403, 404):
            return f"status {status} for a refusal"
        return None
    if family == "query":
        try:
            ET.fromstring(body)
        except ET.ParseError as err:
            return f"answer not XML: {err}"
        return None
    try:
        json.loads(body)
    except ValueError as err:
        return f"answer not JSON: {err}"
    return None


# ---- the fuzzer ------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    probe: Probe
    status: int
    started: float
    ended: float
    seq_moved: bool


class Fuzzer:
    def __init__(
        self, url: str, key: str, secret: str, event_log: JetStreamLog, seed: int, concurrency: int
    ) -> None:
        self.url = url
        self.log = event_log
        self.rng = random.Random(seed)
        random.seed(seed)  # `self_garbage`
        self.probes = Probes(self.rng)
        self.sign = Signer(url, key, secret)
        self.concurrency = concurrency
        self.report = Report()

    async def run(self, total: int) -> Report:
        timeout = aiohttp.ClientTimeout(total=CALL_TIMEOUT_S)
        connector = aiohttp.TCPConnector(limit=self.concurrency, force_close=False)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            self.session = session
            await self.set_up()
            began = time.monotonic()
            for phase, share in PHASES:
                count = max(1, round(total * share))
                self.report.by_phase[phase] = count
                self.attribute(await self.phase(phase, count))
                await self.check_alive(phase)
        self.report.elapsed_s = time.monotonic() - began
        return self.report

    async def phase(self, phase: str, count: int) -> list[Outcome]:
        make = self.probes.anything if phase == "mixed" else self.probes.refused
        probes = iter([make() for _ in range(count)])
        outcomes: list[Outcome] = []

        async def worker() -> None:
            for probe in probes:
                outcome = await self.send(probe)
                if outcome is not None:
                    outcomes.append(outcome)

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        return outcomes

    async def set_up(self) -> None:
        """Queue `q` with share `QS1`, made through the endpoint (as admin)."""
        limits = [{"capacityUnit": UNIT, "maxCapacity": 4}]
        for operation, body in (
            (
                "createserviceenvironment",
                {
                    "serviceEnvironmentName": "env",
                    "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                    "capacityLimits": limits,
                },
            ),
            (
                "createschedulingpolicy",
                {"name": "fifo", "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}},
            ),
            (
                "createjobqueue",
                {
                    "jobQueueName": QUEUE,
                    "jobQueueType": "SAGEMAKER_TRAINING",
                    "priority": 1,
                    "schedulingPolicyArn": "fifo",
                    "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "env"}],
                },
            ),
            (
                "createquotashare",
                {
                    "jobQueue": QUEUE,
                    "quotaShareName": SHARE,
                    "capacityLimits": limits,
                    "resourceSharingConfiguration": {"strategy": "RESERVE"},
                },
            ),
        ):
            probe = Probe(
                "set-up",
                operation,
                "POST",
                f"/v1/{operation}",
                dumps(body),
                {"Content-Type": "application/json"},
                "batch",
                must_refuse=False,
            )
            path, data, headers = self.sign(probe)
            async with self.session.post(self.url + path, data=data, headers=headers) as answer:
                if answer.status != 200:
                    raise RuntimeError(f"{operation}: {answer.status} {await answer.text()}")

    def attribute(self, outcomes: list[Outcome]) -> None:
        """A refused request whose seq moved is a finding when no accepted request
        overlapped it in time; otherwise it cannot be told apart (in the refused phases an
        accepted request is a finding of its own)."""
        accepted = sorted((o.started, o.ended) for o in outcomes if o.status < 400)
        for outcome in outcomes:
            if outcome.status < 400:
                continue
            overlapped = any(
                start < outcome.ended and end > outcome.started for start, end in accepted
            )
            if overlapped:
                self.report.refused_unattributable += 1
                continue
            self.report.refused_checked += 1
            if outcome.seq_moved:
                self.report.state_changes.append(
                    Finding(
                        "state change", outcome.status, outcome.probe.label, outcome.probe.short()
                    )
                )

    async def send(self, probe: Probe) -> Outcome | None:
        report = self.report
        try:
            path, body, headers = self.sign(probe)
        except (ValueError, UnicodeError):
            report.unsendable += 1
            return None
        before = await self.log.last_seq()
        started = time.monotonic()
        try:
            async with self.session.request(
                probe.method, URL(self.url + path, encoded=True), data=body, headers=headers
            ) as response:
                answer = await response.read()
                status, answer_headers = response.status, response.headers
        except (ValueError, UnicodeError, aiohttp.InvalidURL) as err:
            report.unsendable += 1
            del err
            return None
        except (aiohttp.ClientError, TimeoutError) as err:
            report.sent += 1
            report.crashes.append(Finding("connection", 0, repr(err)[:300], probe.short()))
            return None
        ended = time.monotonic()
        after = await self.log.last_seq()
        report.sent += 1
        report.by_status[status] += 1
        report.by_kind.setdefault(probe.kind, Counter())[status] += 1
        report.by_family[probe.family] += 1
        if probe.kind == "wrong-type":
            report.members_wrong_typed.add(probe.label.rsplit("=", 1)[0])
        if status >= 500:
            report.server_errors_5xx.append(
                Finding("5xx", status, answer[:300].decode(errors="replace"), probe.short())
            )
        if probe.must_refuse and status < 400:
            report.accepted.append(Finding("accepted", status, probe.label, probe.short()))
        if probe.kind == "http-layer" and status == 400 and b"__type" not in answer:
            report.http_layer += 1
        elif probe.method == "HEAD":  # no body to an answer to HEAD
            if status >= 400 and not answer_headers.get("x-amzn-ErrorType"):
                report.not_aws_shape.append(
                    Finding("shape", status, "no x-amzn-ErrorType", probe.short())
                )
        else:
            problem = shape_problem(probe.family, status, answer_headers, answer)
            if problem is not None:
                report.not_aws_shape.append(Finding("shape", status, problem, probe.short()))
        return Outcome(probe, status, started, ended, after != before)

    async def check_alive(self, phase: str) -> None:
        """A signed GetCallerIdentity and a Batch list still answer 200."""
        for probe in (
            Probe(
                "alive",
                "GetCallerIdentity",
                "POST",
                "/",
                b"Action=GetCallerIdentity&Version=2011-06-15",
                {"Content-Type": FORM},
                "sts",
                must_refuse=False,
            ),
            Probe(
                "alive",
                "ListSchedulingPolicies",
                "POST",
                "/v1/listschedulingpolicies",
                b"{}",
                {"Content-Type": "application/json"},
                "batch",
                must_refuse=False,
            ),
        ):
            path, body, headers = self.sign(probe)
            try:
                async with self.session.post(
                    self.url + path, data=body, headers=headers
                ) as response:
                    status = response.status
                    await response.read()
            except (aiohttp.ClientError, TimeoutError) as err:
                self.report.crashes.append(
                    Finding("endpoint down", 0, f"after {phase}: {err!r}", probe.short())
                )
                continue
            if status != 200:
                self.report.crashes.append(
                    Finding("endpoint unwell", status, f"after {phase}", probe.short())
                )


# ---- running and printing -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Options:
    requests: int = 20_000
    seed: int = 1
    concurrency: int = 16


async def fuzz(
    url: str, key: str, secret: str, event_log: JetStreamLog, options: Options
) -> Report:
    """Fuzz the endpoint at `url` (admin `key`); server errors logged meanwhile are kept."""
    errors = ServerErrors()
    logging.getLogger().addHandler(errors)
    try:
        fuzzer = Fuzzer(url, key, secret, event_log, options.seed, options.concurrency)
        report = await fuzzer.run(options.requests)
    finally:
        logging.getLogger().removeHandler(errors)
    report.server_errors = errors.records
    report.bad_http_logged = errors.bad_http
    report.crashes.extend(Finding("server error logged", 0, line, "-") for line in errors.records)
    return report


def run(options: Options) -> Report:
    """Start admission with its endpoint, set up a queue, fuzz it, stop it."""
    from aws_admission import admission  # a sibling module: this file runs as a script

    async def main() -> Report:
        with tempfile.TemporaryDirectory(prefix="qm-fuzz-aws-") as tmp:
            async with admission(Path(tmp)) as started:
                return await fuzz(started.url, started.key, started.secret, started.log, options)

    return asyncio.run(main())


def print_report(report: Report, options: Options) -> None:
    rate = report.sent / report.elapsed_s if report.elapsed_s else 0.0
    print(
        f"\nrequests sent: {report.sent} in {report.elapsed_s:.1f} s ({rate:.0f}/s), "
        f"seed {options.seed}, {options.concurrency} in flight"
    )
    print("per phase: " + ", ".join(f"{k} {v}" for k, v in report.by_phase.items()))
    print("per status: " + ", ".join(f"{k} {v}" for k, v in report.by_status.most_common()))
    print("per protocol: " + ", ".join(f"{k} {v}" for k, v in report.by_family.most_common()))
    print("per kind of request:")
    for kind, codes in sorted(report.by_kind.items()):
        total = sum(codes.values())
        print(f"  {kind:15s} {total:7d}  " + ", ".join(f"{k} {v}" for k, v in codes.most_common()))
    print(f"Batch members given a wrong type: {len(report.members_wrong_typed)}")
    print(
        f"refused requests checked for a state change: {report.refused_checked} "
        f"(not counted: overlapped by an accepted one: {report.refused_unattributable})"
    )
    print(
        f"refused by the HTTP layer (aiohttp, before the handler): {report.http_layer} "
        f"({report.bad_http_logged} logged by aiohttp at ERROR)"
    )
    if report.unsendable:
        print(f"not sendable by the client (skipped): {report.unsendable}")
    for title, findings in (
        ("crashes", report.crashes),
        ("5xx", report.server_errors_5xx),
        ("state changes by refused requests", report.state_changes),
        ("accepted though they must be refused", report.accepted),
        ("not in AWS's error shape", report.not_aws_shape),
    ):
        print(f"{title}: {len(findings)}")
        kinds = Counter(f"{f.kind} {f.status} {f.detail[:80]}" for f in findings)
        for kind, n in kinds.most_common(8):
            print(f"  x{n} {kind}")
        for finding in findings[:SHOW]:
            print(f"  {finding.line()[:600]}")
    print("RESULT: " + ("clean" if report.clean else "FINDINGS"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    options = Options(requests=args.requests, seed=args.seed, concurrency=args.concurrency)
    logging.getLogger().setLevel(logging.ERROR)  # collected by `ServerErrors`, then printed
    report = run(options)
    print_report(report, options)
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
