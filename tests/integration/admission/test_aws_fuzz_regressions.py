"""Bugs `bench/fuzz_aws.py` found in the AWS-compatible endpoint, each by its smallest
repro, and the fuzz itself in its smoke size.

1. JSON nested a few thousand deep made `json.loads` raise RecursionError: answered
   500 ServerException (and logged as a fault); now 400 ClientException.
2. A lone surrogate (`"\\ud800"`) in a JSON string reached protobuf, which cannot
   encode it: 500; now 400 naming the member.
3. A member Quartermaster refuses (fair-share, compute environments) given an empty
   value of another type (`"fairsharePolicy": ""`) was dropped and the call accepted;
   only an empty value of the member's own type is taken as unused now.
4. IAM and STS answers echoed characters XML cannot hold (`\\x01` in a RoleName):
   the client's XML parser failed on a 200; they are U+FFFD now.
5. A request aiohttp cannot parse (a header over its line limit) was logged at ERROR
   with a traceback, each time: a client could fill the log; now DEBUG.
From a review:
6. SimulatePrincipalPolicy answered a member per action and resource: a 100 KiB body
   made 672 MB of XML; both are bounded now.
7. A training job name with an attempt number of 5000 digits: int() raised, 500.
8. A path with `..` segments verified (the signature covers the normalized path) and
   was routed as sent; refused now. An unsigned X-Amz-Target (it picks the operation)
   is refused.
"""

from __future__ import annotations

import asyncio
import http.client
import importlib.util
import json
import logging
import sys
from pathlib import Path
from types import ModuleType

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from .conftest import Starter
from .test_aws_endpoint import PAYLOAD, REGION, Aws, set_up, start

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "fuzz_aws.py"


@pytest.fixture
def keys_dir(tmp_path: Path) -> Path:
    return tmp_path / "keys"


def signed(aws: Aws, path: str, body: bytes) -> requests.Response:
    """A Batch request boto3 would never send, signed with the admin key."""
    headers = {"Content-Type": "application/json"}
    request = AWSRequest(method="POST", url=aws.url + path, data=body, headers=headers)
    SigV4Auth(Credentials(aws.key, aws.secret), "batch", REGION).add_auth(request)
    prepared = request.prepare()
    return requests.post(prepared.url, data=body, headers=dict(prepared.headers), timeout=10)


async def test_hostile_json_is_the_clients_fault(start_admission: Starter, keys_dir: Path) -> None:
    c, aws = await start(start_admission, keys_dir)
    await set_up(aws)
    before = await c.log.last_seq()
    submit = {
        "jobName": "x",
        "jobQueue": "q",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "serviceRequestPayload": json.dumps(PAYLOAD),
    }
    cases = [
        ("/v1/submitservicejob", b'{"jobName": ' + b"[" * 5000 + b"]" * 5000 + b"}", ""),
        ("/v1/createjobqueue", b'{"tags": ' + b'{"a":' * 5000 + b"1" + b"}" * 5001, ""),
        ("/v1/submitservicejob", json.dumps({**submit, "jobName": "\ud800"}).encode(), "jobName:"),
        (
            "/v1/submitservicejob",
            json.dumps({**submit, "tags": {"\udfff": "v"}}).encode(),
            "tags:",
        ),
        (
            "/v1/createschedulingpolicy",
            json.dumps({"name": "fs", "fairsharePolicy": ""}).encode(),
            "fairsharePolicy:",
        ),
    ]
    for path, body, field in cases:
        answer = await asyncio.to_thread(signed, aws, path, body)
        assert answer.status_code == 400, (path, body[:60], answer.text)
        assert answer.json()["__type"] == "ClientException"
        assert answer.headers["x-amzn-ErrorType"] == "ClientException"
        assert answer.json()["message"].startswith(field)
    assert await c.log.last_seq() == before  # nothing written
    # An empty member of its own type is still taken as unused.
    fine = {"name": "fs", "fairsharePolicy": {}, "quotaSharePolicy": {}}
    answer = await asyncio.to_thread(
        signed, aws, "/v1/createschedulingpolicy", json.dumps(fine).encode()
    )
    assert answer.status_code == 200, answer.text


async def test_unparsable_http_is_not_logged_as_a_fault(
    start_admission: Starter, keys_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, aws = await start(start_admission, keys_dir)
    caplog.set_level(logging.INFO)
    answer = await asyncio.to_thread(
        requests.post,
        aws.url + "/v1/listschedulingpolicies",
        data=b"{}",
        headers={"X-Long": "x" * 20_000},
        timeout=10,
    )
    assert answer.status_code == 400
    http = [r for r in caplog.records if r.name.startswith(("qm_admission.aws", "aiohttp"))]
    assert [r.getMessage() for r in http if r.levelno >= logging.WARNING] == []
    # and the endpoint still answers
    assert (await aws("batch", "list_scheduling_policies"))["schedulingPolicies"] == []


async def test_iam_answers_stay_xml(start_admission: Starter, keys_dir: Path) -> None:
    _, aws = await start(start_admission, keys_dir)
    role = await aws("iam", "get_role", RoleName="a\x01b\x00c")
    assert role["Role"]["RoleName"] == "a\ufffdb\ufffdc"
    simulated = await aws(
        "iam",
        "simulate_principal_policy",
        PolicySourceArn="arn:aws:iam::000000000000:role/r",
        ActionNames=["s3:\x02Get"],
    )
    assert simulated["EvaluationResults"][0]["EvalActionName"] == "s3:\ufffdGet"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_aws", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


async def test_four_hundred_hostile_requests_find_nothing(
    start_admission: Starter, keys_dir: Path
) -> None:
    """`bench/fuzz_aws.py` in its smoke size: no crash, no 5xx, no state change by a
    refused request, nothing accepted that must be refused, every refusal in AWS's shape."""
    c, aws = await start(start_admission, keys_dir)
    fuzz = load_script()
    options = fuzz.Options(requests=400, seed=7, concurrency=8)
    report = await fuzz.fuzz(aws.url, aws.key, aws.secret, c.log, options)
    fuzz.print_report(report, options)  # shown when the test fails
    assert report.sent >= 400
    assert [f.line() for f in report.crashes] == []
    assert [f.line() for f in report.server_errors_5xx] == []
    assert [f.line() for f in report.state_changes] == []
    assert [f.line() for f in report.accepted] == []
    assert [f.line() for f in report.not_aws_shape] == []
    assert report.refused_checked > 200
    # Every kind of hostile request went out, over all three protocols.
    assert set(report.by_family) == {"batch", "sagemaker", "query"}
    assert {"wrong-type", "malformed-json", "bad-signature", "sagemaker-junk", "query-junk"} <= set(
        report.by_kind
    )


async def test_review_findings_are_refused(start_admission: Starter, keys_dir: Path) -> None:
    c, aws = await start(start_admission, keys_dir)
    before = await c.log.last_seq()
    many = await aws.error(
        "iam",
        "simulate_principal_policy",
        PolicySourceArn="arn:aws:iam::000000000000:role/r",
        ActionNames=[f"s3:A{i}" for i in range(101)],
        ResourceArns=["*"],
    )
    assert many["ResponseMetadata"]["HTTPStatusCode"] == 400
    pairs = await aws.error(
        "iam",
        "simulate_principal_policy",
        PolicySourceArn="arn:aws:iam::000000000000:role/r",
        ActionNames=[f"s3:A{i}" for i in range(50)],
        ResourceArns=[f"arn:aws:s3:::b{i}" for i in range(50)],
    )
    assert pairs["ResponseMetadata"]["HTTPStatusCode"] == 400
    long_attempt = await aws.error(
        "sagemaker", "describe_training_job", TrainingJobName="a-0123abcd-" + "1" * 5000
    )
    assert long_attempt["Error"]["Code"] == "ValidationException"

    def dotted() -> tuple[int, dict[str, str]]:
        request = AWSRequest(method="GET", url=aws.url + "/v1/tags/x/../arn%3Aqm%3Ajob")
        SigV4Auth(Credentials(aws.key, aws.secret), "batch", REGION).add_auth(request)
        headers = dict(request.prepare().headers)
        # botocore signs the normalized path; send the dotted one as it stood (http.client
        # sends the path untouched, where requests would normalize it)
        host, port = aws.url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            connection.request("GET", "/v1/tags/x/../arn%3Aqm%3Ajob", headers=headers)
            reply = connection.getresponse()
            return reply.status, json.loads(reply.read())
        finally:
            connection.close()

    status, refusal = await asyncio.to_thread(dotted)
    assert status == 400 and "segments" in refusal["message"]

    def unsigned_target() -> requests.Response:
        request = AWSRequest(
            method="POST",
            url=aws.url + "/",
            data=b"{}",
            headers={"Content-Type": "application/x-amz-json-1.1"},
        )
        SigV4Auth(Credentials(aws.key, aws.secret), "sagemaker", REGION).add_auth(request)
        headers = {**dict(request.prepare().headers), "X-Amz-Target": "SageMaker.ListTrainingJobs"}
        return requests.post(aws.url + "/", data=b"{}", headers=headers, timeout=10)

    answer = await asyncio.to_thread(unsigned_target)
    assert answer.status_code == 403 and "x-amz-target" in answer.json()["message"]
    assert await c.log.last_seq() == before
