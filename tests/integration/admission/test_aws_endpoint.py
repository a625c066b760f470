"""The AWS-compatible endpoint through boto3's own clients (issue 25).

Real nats-server and Postgres, admission in-process with its HTTP endpoint; boto3's
`batch`, `sagemaker`, `iam` and `sts` clients sign with SigV4 keys from a key file,
as `qm keys issue` writes it. Every Batch route, pagination and filters, AWS's error
shapes, signatures refused, authorization as the gRPC API's, and the training job
behind each attempt (DescribeTrainingJob, ListTrainingJobs, Stop, Update).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from quartermaster import events as ev
from quartermaster.auth import Role, ShareRef
from quartermaster.auth.access_keys import AccessKeyFile
from quartermaster.eventlog import decode_batch
from quartermaster.events.base import Request

from .conftest import Client, Starter
from .test_admission_server import UNIT
from .test_aws_fidelity import run_job

REGION = "us-east-1"
PAYLOAD = {
    "TrainingJobName": "train",
    "RoleArn": "arn:aws:iam::000000000000:role/SageMakerRole",
    "AlgorithmSpecification": {"TrainingImage": "img", "TrainingInputMode": "File"},
    "HyperParameters": {"epochs": "3"},
    "ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1, "VolumeSizeInGB": 30},
    "OutputDataConfig": {"S3OutputPath": "s3://bucket/out"},
    "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
}


class Aws:
    """boto3 clients of one endpoint, each call run on a thread (the server shares our loop)."""

    def __init__(self, port: int, key: str, secret: str) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.key, self.secret = key, secret
        config = Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=30)
        self.clients = {
            name: boto3.client(
                name,
                endpoint_url=self.url,
                region_name=REGION,
                aws_access_key_id=key,
                aws_secret_access_key=secret,
                config=config,
            )
            for name in ("batch", "sagemaker", "iam", "sts")
        }

    async def __call__(self, service: str, operation: str, **params: Any) -> dict[str, Any]:
        method: Callable[..., dict[str, Any]] = getattr(self.clients[service], operation)
        return await asyncio.to_thread(method, **params)

    async def error(self, service: str, operation: str, **params: Any) -> dict[str, Any]:
        with pytest.raises(ClientError) as raised:
            await self(service, operation, **params)
        return dict(raised.value.response)


def issue(directory: Path, subject: str, role: Role, *shares: str) -> tuple[str, str]:
    record, secret = AccessKeyFile(directory).add(
        subject, [role], [ShareRef.parse(s) for s in shares], now=time.time()
    )
    return record.access_key_id, secret


async def requests_since(c: Client, seq: int) -> list[Request]:
    """The request events appended after `seq`."""
    found: list[Request] = []
    last = await c.log.last_seq()
    if last <= seq:
        return found
    async with contextlib.aclosing(c.log.read(seq + 1, last)) as entries:
        async for entry in entries:
            found.extend(e for e in decode_batch(entry.data) if isinstance(e, Request))
    return found


@pytest.fixture
def keys_dir(tmp_path: Path) -> Path:
    return tmp_path / "keys"


async def start(start_admission: Starter, keys_dir: Path) -> tuple[Client, Aws]:
    key, secret = issue(keys_dir, "ops", Role.ADMIN)
    c = await start_admission(aws=True, aws_keys_dir=str(keys_dir))
    return c, Aws(c.aws_port, key, secret)


async def set_up(aws: Aws) -> None:
    await aws(
        "batch",
        "create_service_environment",
        serviceEnvironmentName="env",
        serviceEnvironmentType="SAGEMAKER_TRAINING",
        capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 4}],
    )
    await aws(
        "batch",
        "create_scheduling_policy",
        name="fifo",
        quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"},
    )
    await aws(
        "batch",
        "create_job_queue",
        jobQueueName="q",
        jobQueueType="SAGEMAKER_TRAINING",
        priority=1,
        schedulingPolicyArn="fifo",
        serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "env"}],
    )
    for name in ("QS1", "QS2"):
        await aws(
            "batch",
            "create_quota_share",
            jobQueue="q",
            quotaShareName=name,
            capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 2}],
            resourceSharingConfiguration={"strategy": "LEND_AND_BORROW", "borrowLimit": -1},
            preemptionConfiguration={"inSharePreemption": "DISABLED"},
        )


async def submit(aws: Aws, name: str = "train", share: str = "QS1", **extra: Any) -> dict[str, Any]:
    return await aws(
        "batch",
        "submit_service_job",
        jobName=name,
        jobQueue="q",
        serviceJobType="SAGEMAKER_TRAINING",
        serviceRequestPayload=json.dumps({**PAYLOAD, "TrainingJobName": name}),
        quotaShareName=share,
        **extra,
    )


async def test_batch_routes_through_boto3(start_admission: Starter, keys_dir: Path) -> None:
    c, aws = await start(start_admission, keys_dir)
    await set_up(aws)
    envs = await aws("batch", "describe_service_environments", serviceEnvironments=["env"])
    assert envs["serviceEnvironments"][0]["capacityLimits"] == [
        {"capacityUnit": UNIT, "maxCapacity": 4}
    ]
    queues = await aws("batch", "describe_job_queues", jobQueues=["q"])
    assert queues["jobQueues"][0]["jobQueueName"] == "q"
    assert queues["jobQueues"][0]["state"] == "ENABLED"
    policies = await aws("batch", "list_scheduling_policies")
    assert [p["arn"].rsplit("/", 1)[-1] for p in policies["schedulingPolicies"]] == ["fifo"]
    shares = await aws("batch", "list_quota_shares", jobQueue="q", maxResults=1)
    assert len(shares["quotaShares"]) == 1 and shares["nextToken"]
    rest = await aws("batch", "list_quota_shares", jobQueue="q", nextToken=shares["nextToken"])
    names = [s["quotaShareName"] for s in shares["quotaShares"] + rest["quotaShares"]]
    assert sorted(names) == ["QS1", "QS2"]
    share = await aws(
        "batch", "describe_quota_share", quotaShareArn=rest["quotaShares"][0]["quotaShareArn"]
    )
    assert share["capacityLimits"] == [{"capacityUnit": UNIT, "maxCapacity": 2}]
    assert share["jobQueueArn"].endswith("job-queue/q")
    await aws(
        "batch",
        "update_quota_share",
        quotaShareArn=share["quotaShareArn"],
        capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 3}],
    )
    await aws(
        "batch",
        "update_service_environment",
        serviceEnvironment="env",
        capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 5}],
    )
    await aws("batch", "update_job_queue", jobQueue="q", priority=5)
    await aws(
        "batch",
        "update_scheduling_policy",
        arn="fifo",
        quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"},
    )
    described = await aws("batch", "describe_scheduling_policies", arns=["fifo"])
    assert described["schedulingPolicies"][0]["name"] == "fifo"

    # jobs: submit, describe by id and by ARN, list with filters and pages, update, terminate
    submitted = [await submit(aws, f"train-{i}") for i in range(3)]
    first = submitted[0]
    assert first["jobArn"].endswith(first["jobId"]) and first["jobName"] == "train-0"
    by_id = await aws("batch", "describe_service_job", jobId=first["jobId"])
    by_arn = await aws("batch", "describe_service_job", jobId=first["jobArn"])
    assert by_id["status"] == by_arn["status"] == "RUNNABLE"
    assert isinstance(by_id["createdAt"], int) and by_id["createdAt"] > 1_700_000_000_000
    assert by_id["quotaShareName"] == "QS1"
    page = await aws("batch", "list_service_jobs", jobQueue="q", jobStatus="RUNNABLE", maxResults=2)
    assert len(page["jobSummaryList"]) == 2 and page["nextToken"]
    more = await aws(
        "batch",
        "list_service_jobs",
        jobQueue="q",
        jobStatus="RUNNABLE",
        nextToken=page["nextToken"],
    )
    listed = {j["jobId"] for j in page["jobSummaryList"] + more["jobSummaryList"]}
    assert listed == {s["jobId"] for s in submitted}
    named = await aws(
        "batch",
        "list_service_jobs",
        jobQueue="q",
        filters=[{"name": "JOB_NAME", "values": ["train-1"]}],
    )
    assert [j["jobName"] for j in named["jobSummaryList"]] == ["train-1"]
    running = await aws("batch", "list_service_jobs", jobQueue="q")
    assert running["jobSummaryList"] == []  # AWS's default: RUNNING only
    updated = await aws("batch", "update_service_job", jobId=first["jobArn"], schedulingPriority=7)
    assert updated["jobId"] == first["jobId"]
    assert (await aws("batch", "describe_service_job", jobId=first["jobId"]))[
        "schedulingPriority"
    ] == 7
    snapshot = await aws("batch", "get_job_queue_snapshot", jobQueue="q")
    assert snapshot["frontOfQueue"]["jobs"][0]["jobArn"] == first["jobArn"]  # priority 7 first
    await aws("batch", "terminate_service_job", jobId=submitted[2]["jobId"], reason="not needed")
    ended = await aws("batch", "describe_service_job", jobId=submitted[2]["jobId"])
    assert ended["status"] == "FAILED" and ended["isTerminated"] is True

    # tags: on a job and on a queue
    await aws("batch", "tag_resource", resourceArn=first["jobArn"], tags={"team": "a", "x": "1"})
    await aws("batch", "untag_resource", resourceArn=first["jobArn"], tagKeys=["x"])
    tags = await aws("batch", "list_tags_for_resource", resourceArn=first["jobArn"])
    assert tags["tags"] == {"team": "a"}
    queue_arn = queues["jobQueues"][0]["jobQueueArn"]
    await aws("batch", "tag_resource", resourceArn=queue_arn, tags={"cost": "ml"})
    assert (await aws("batch", "list_tags_for_resource", resourceArn=queue_arn))["tags"] == {
        "cost": "ml"
    }

    # deletes, in AWS's order
    for s in submitted[:2]:
        await aws("batch", "terminate_service_job", jobId=s["jobId"], reason="cleanup")
    for s in shares["quotaShares"] + rest["quotaShares"]:
        await aws("batch", "update_quota_share", quotaShareArn=s["quotaShareArn"], state="DISABLED")
        await aws("batch", "delete_quota_share", quotaShareArn=s["quotaShareArn"])
    await aws("batch", "update_job_queue", jobQueue="q", state="DISABLED")
    await aws("batch", "delete_job_queue", jobQueue="q")
    await aws("batch", "update_service_environment", serviceEnvironment="env", state="DISABLED")
    await aws("batch", "delete_service_environment", serviceEnvironment="env")
    await aws("batch", "delete_scheduling_policy", arn="fifo")
    assert (await aws("batch", "list_scheduling_policies"))["schedulingPolicies"] == []
    # the principal of the key is on every request event
    events = await requests_since(c, 0)
    assert len(events) > 20 and {e.principal for e in events} == {"ops"}


async def test_errors_in_aws_shapes_and_nothing_written(
    start_admission: Starter, keys_dir: Path
) -> None:
    c, aws = await start(start_admission, keys_dir)
    await set_up(aws)
    before = await c.log.last_seq()
    duplicate = await aws.error(
        "batch",
        "create_job_queue",
        jobQueueName="q",
        priority=1,
        schedulingPolicyArn="fifo",
        serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": "env"}],
    )
    assert duplicate["Error"]["Code"] == "ClientException"
    assert "Object already exists" in duplicate["Error"]["Message"]
    assert duplicate["ResponseMetadata"]["HTTPStatusCode"] == 400
    missing = await aws.error("batch", "describe_service_job", jobId="nope")
    assert missing["Error"]["Code"] == "ClientException"
    assert missing["Error"]["Message"].startswith("jobId:")
    bad = await aws.error(
        "batch",
        "submit_service_job",
        jobName="x",
        jobQueue="q",
        serviceJobType="SAGEMAKER_TRAINING",
        serviceRequestPayload="{",
        quotaShareName="QS1",
    )
    assert bad["Error"]["Message"].startswith("serviceRequestPayload")
    fair = await aws.error(
        "batch",
        "submit_service_job",
        jobName="x",
        jobQueue="q",
        serviceJobType="SAGEMAKER_TRAINING",
        serviceRequestPayload=json.dumps(PAYLOAD),
        shareIdentifier="blue",
    )
    assert fair["Error"]["Message"].startswith("shareIdentifier:")
    nope = await aws.error("sagemaker", "describe_training_job", TrainingJobName="x-0123abcd-1")
    assert nope["Error"]["Code"] == "ValidationException"

    def raw(path: str, body: bytes, target: str = "") -> requests.Response:
        """A request boto3 would never send, signed with the admin key."""
        headers = {"Content-Type": "application/json"}
        service = "batch"
        if target:
            headers = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target}
            service = "sagemaker"
        request = AWSRequest(method="POST", url=aws.url + path, data=body, headers=headers)
        SigV4Auth(Credentials(aws.key, aws.secret), service, REGION).add_auth(request)
        prepared = request.prepare()
        return requests.post(prepared.url, data=body, headers=dict(prepared.headers), timeout=10)

    cases = [
        ("/v1/nosuchoperation", b"{}", "", 400),
        ("/v1/submitservicejob", b"{not json", "", 400),
        ("/v1/submitservicejob", b"[1, 2]", "", 400),
        ("/v1/submitservicejob", json.dumps({"jobName": 5}).encode(), "", 400),
        (
            "/v1/updateservicejob",
            json.dumps({"jobId": "x", "schedulingPriority": "high"}).encode(),
            "",
            400,
        ),
        ("/v1/createjobqueue", b"x" * (3 * 1024 * 1024), "", 400),
        ("/", b"{}", "SageMaker.CreateTrainingJob", 400),
        ("/", b"{", "SageMaker.DescribeTrainingJob", 400),
    ]
    for path, body, target, status in cases:
        response = await asyncio.to_thread(raw, path, body, target)
        assert response.status_code == status, (path, response.text)
        assert response.headers["x-amzn-ErrorType"]
        assert "message" in response.json()
    wrong_type = await asyncio.to_thread(
        raw, "/v1/submitservicejob", json.dumps({"jobName": 5}).encode()
    )
    assert wrong_type.json() == {
        "__type": "ClientException",
        "message": wrong_type.json()["message"],
    }
    assert wrong_type.json()["message"].startswith("jobName:")
    assert await c.log.last_seq() == before  # nothing written by any refusal


async def test_signatures_refused(start_admission: Starter, keys_dir: Path) -> None:
    c, aws = await start(start_admission, keys_dir)
    wrong = Aws(c.aws_port, aws.key, aws.secret + "x")
    unknown = Aws(c.aws_port, "QMAKUNKNOWNKEY000000", aws.secret)
    assert (await wrong.error("batch", "list_scheduling_policies"))["Error"][
        "Code"
    ] == "InvalidSignatureException"
    assert (await unknown.error("batch", "list_scheduling_policies"))["Error"][
        "Code"
    ] == "UnrecognizedClientException"
    for failure in (
        await wrong.error("batch", "list_scheduling_policies"),
        await wrong.error("sagemaker", "list_training_jobs"),
        await wrong.error("sts", "get_caller_identity"),
    ):
        assert failure["ResponseMetadata"]["HTTPStatusCode"] == 403
    unsigned = await asyncio.to_thread(
        requests.post, aws.url + "/v1/listschedulingpolicies", data=b"{}", timeout=10
    )
    assert unsigned.status_code == 403
    assert unsigned.json()["__type"] == "MissingAuthenticationTokenException"

    def stale() -> requests.Response:
        """Signed by botocore with its clock 16 minutes behind."""
        old = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(minutes=16)
        request = AWSRequest(method="POST", url=aws.url + "/v1/listschedulingpolicies", data=b"{}")
        with mock.patch("botocore.auth.get_current_datetime", return_value=old):
            SigV4Auth(Credentials(aws.key, aws.secret), "batch", REGION).add_auth(request)
        prepared = request.prepare()
        return requests.post(prepared.url, data=b"{}", headers=dict(prepared.headers), timeout=10)

    expired = await asyncio.to_thread(stale)
    assert expired.status_code == 403
    assert "Signature expired" in expired.json()["message"]


async def test_authorization_is_the_grpc_apis(start_admission: Starter, keys_dir: Path) -> None:
    c, admin = await start(start_admission, keys_dir)
    await set_up(admin)
    key, secret = issue(keys_dir, "alice", Role.MEMBER, "q/QS1")  # read without a restart
    alice = Aws(c.aws_port, key, secret)
    auditor = Aws(c.aws_port, *issue(keys_dir, "audit", Role.AUDITOR))
    mine = await submit(alice, "mine", "QS1")
    theirs = await submit(admin, "theirs", "QS2")
    denied = await alice.error(
        "batch",
        "submit_service_job",
        jobName="x",
        jobQueue="q",
        serviceJobType="SAGEMAKER_TRAINING",
        serviceRequestPayload=json.dumps(PAYLOAD),
        quotaShareName="QS2",
    )
    assert denied["Error"]["Code"] == "AccessDeniedException"
    assert denied["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert (await alice.error("batch", "describe_service_job", jobId=theirs["jobId"]))["Error"][
        "Code"
    ] == "AccessDeniedException"
    assert (await alice.error("batch", "create_scheduling_policy", name="p2"))["Error"][
        "Code"
    ] == "AccessDeniedException"
    assert (await auditor.error("batch", "terminate_service_job", jobId=mine["jobId"], reason="x"))[
        "Error"
    ]["Code"] == "AccessDeniedException"
    assert (await auditor("batch", "describe_service_job", jobId=theirs["jobId"]))[
        "jobName"
    ] == "theirs"
    submitted = [e for e in await requests_since(c, 0) if isinstance(e, ev.JobSubmitted)]
    assert {e.job_id: e.principal for e in submitted} == {
        mine["jobId"]: "alice",
        theirs["jobId"]: "ops",
    }
    who = await alice("sts", "get_caller_identity")
    assert who["Arn"].endswith(":user/alice") and who["UserId"] == key
    AccessKeyFile(keys_dir).revoke(key)
    assert (await alice.error("batch", "describe_service_job", jobId=mine["jobId"]))["Error"][
        "Code"
    ] == "UnrecognizedClientException"


async def test_training_jobs_behind_attempts(start_admission: Starter, keys_dir: Path) -> None:
    c, aws = await start(start_admission, keys_dir)
    await set_up(aws)
    done = await submit(aws, "done")
    await run_job(c, done["jobId"], finish=True, model="s3://bucket/out/model.tar.gz")
    live = await submit(aws, "live")
    described = await aws("batch", "describe_service_job", jobId=done["jobId"])
    name = described["latestAttempt"]["serviceResourceId"]["value"].rsplit("/", 1)[-1]
    assert described["latestAttempt"]["serviceResourceId"]["name"] == "TrainingJobArn"
    job = await aws("sagemaker", "describe_training_job", TrainingJobName=name)
    assert job["TrainingJobStatus"] == "Completed" and job["SecondaryStatus"] == "Completed"
    assert job["ModelArtifacts"]["S3ModelArtifacts"] == "s3://bucket/out/model.tar.gz"
    assert job["HyperParameters"] == {"epochs": "3"}
    assert job["ResourceConfig"]["InstanceType"] == UNIT
    assert job["AlgorithmSpecification"]["TrainingImage"] == "img"
    assert [t["Status"] for t in job["SecondaryStatusTransitions"]] == [
        "Starting",
        "Training",
        "Completed",
    ]
    assert isinstance(job["CreationTime"], dt.datetime)
    listed = await aws("sagemaker", "list_training_jobs", StatusEquals="Completed")
    assert [s["TrainingJobName"] for s in listed["TrainingJobSummaries"]] == [name]
    assert (await aws("sagemaker", "list_training_jobs", NameContains="nothing"))[
        "TrainingJobSummaries"
    ] == []
    stop = await aws.error("sagemaker", "stop_training_job", TrainingJobName=name)
    assert stop["Error"]["Code"] == "ValidationException"
    assert live["jobId"]
    roles = await aws("iam", "get_role", RoleName="SageMakerRole")
    assert roles["Role"]["Arn"].endswith(":role/SageMakerRole")
    simulated = await aws(
        "iam",
        "simulate_principal_policy",
        PolicySourceArn=roles["Role"]["Arn"],
        ActionNames=["s3:PutObject"],
        ResourceArns=["arn:aws:s3:::b/*"],
    )
    assert simulated["EvaluationResults"][0]["EvalDecision"] == "allowed"
