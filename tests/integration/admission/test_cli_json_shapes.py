"""`qm ... -o json` prints what the AWS Batch operation of the same name returns (issue 25).

Each command's JSON is checked against botocore's output shape of that operation: a
member botocore defines must carry botocore's name and type (enum values from its
list, epoch-ms times as integers), a required one must be there, and Quartermaster's
own members must be camelCase too. Against real admission (JetStream and Postgres,
no scheduler); the offline cases show the check refuses the old `MessageToDict` JSON.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.cli.main import main
from quartermaster.cli.options import LISTED_AS
from quartermaster.client.shapes import aws_output, listing
from quartermaster.store import arns

from .conftest import Client
from .test_admission_server import UNIT, job, submit
from .test_aws_fidelity import run_job

MODEL = botocore.session.get_session().get_service_model("batch")
# Required by botocore, never returned by Quartermaster (it has no compute environments).
NEVER_SHOWN = {("JobQueueDetail", "computeEnvironmentOrder")}
PROTO_ENUM_VALUES = {v.name for e in pb.DESCRIPTOR.enum_types_by_name.values() for v in e.values}


def against_aws(value: Any, shape: Any, path: str = "$") -> list[str]:
    """Where `value` differs from botocore's `shape`: names, types, enum values, required."""
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, AWS has a structure"]
        wrong = [
            f"{path}.{name}: missing (required)"
            for name in shape.required_members
            if name not in value and (shape.name, name) not in NEVER_SHOWN
        ]
        for key, item in value.items():
            if key in shape.members:
                wrong += against_aws(item, shape.members[key], f"{path}.{key}")
            elif spelled := [m for m in shape.members if m.lower() == key.replace("_", "").lower()]:
                wrong.append(f"{path}.{key}: AWS spells it {spelled[0]}")
        return wrong
    if kind == "list":
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, AWS has a list"]
        items = enumerate(value)
        return [w for i, v in items for w in against_aws(v, shape.member, f"{path}[{i}]")]
    if kind == "map":
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, AWS has a map"]
        return [w for k, v in value.items() for w in against_aws(v, shape.value, f"{path}.{k}")]
    if kind == "string":
        if not isinstance(value, str):
            return [f"{path}: {value!r} is not a string"]
        enum = getattr(shape, "enum", None)
        return [f"{path}: {value!r} is not one of {enum}"] if enum and value not in enum else []
    numbers = {"integer": (int,), "long": (int,), "timestamp": (int,), "double": (int, float)}
    if kind in numbers:
        ok = isinstance(value, numbers[kind]) and not isinstance(value, bool)
        return [] if ok else [f"{path}: {value!r} is not a {kind}"]
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: {value!r} is not a boolean"]
    return [f"{path}: botocore type {kind} not checked"]


def output_mismatches(value: Any, operation: str) -> list[str]:
    shape = MODEL.operation_model(operation).output_shape
    wrong = against_aws(value, shape)
    if isinstance(value, dict) and value and not set(value) & set(shape.members):
        wrong.append(f"$: none of AWS's members ({', '.join(shape.members)})")
    return wrong


def our_own_mismatches(value: Any, path: str = "$") -> list[str]:
    """Quartermaster's members too: camelCase keys, enum values without their type prefix,
    times (`...At`) as integers. (Tags and share names in the test hold no `_`.)"""
    if isinstance(value, list):
        return [w for i, v in enumerate(value) for w in our_own_mismatches(v, f"{path}[{i}]")]
    if isinstance(value, str):
        return [f"{path}: {value} is a proto enum name"] if value in PROTO_ENUM_VALUES else []
    if not isinstance(value, dict):
        return []
    wrong = []
    for key, item in value.items():
        if "_" in key:
            wrong.append(f"{path}.{key}: not camelCase")
        if re.search(r"[a-z]At$", key) and (not isinstance(item, int) or isinstance(item, bool)):
            wrong.append(f"{path}.{key}: {item!r} is not epoch ms")
        wrong += our_own_mismatches(item, f"{path}.{key}")
    return wrong


# ---- the check refuses the old JSON ----------------------------------------------------

JOB_ARN = arns.job("j1")
RUNNING = pb.ServiceJobDetail(
    job_id="j1",
    job_name="train",
    job_arn=JOB_ARN,
    job_queue="q",
    service_job_type="SAGEMAKER_TRAINING",
    status=pb.JOB_STATUS_RUNNING,
    created_at=1_700_000_000_000,
    started_at=1_700_000_001_000,
)
SUMMARY = pb.ServiceJobSummary(
    job_id="j1",
    job_name="train",
    service_job_type="SAGEMAKER_TRAINING",
    status=pb.JOB_STATUS_RUNNING,
)
SHARE = pb.QuotaShareDetail(
    quota_share_name="QS1",
    state=pb.QUOTA_SHARE_STATE_ENABLED,
    capacity_limits=[pb.CapacityLimit(capacity_unit=UNIT, max_capacity=2)],
)
QUEUE = pb.JobQueueDetail(
    job_queue_name="q", job_queue_arn=arns.job_queue("q"), state=pb.QUEUE_STATE_ENABLED
)
SNAPSHOT = pb.GetJobQueueSnapshotResponse(
    job_queue_name="q",
    front_of_queue=[pb.FrontOfQueueJob(job_id="j1", job_arn=JOB_ARN, earliest_time_at_position=5)],
    last_updated_at=1_700_000_000_000,
)
# operation: (the answer `qm` prints, or the listed items with their command)
SAMPLES: dict[str, Any] = {
    "DescribeServiceJob": RUNNING,
    "ListServiceJobs": (("job", "list"), [SUMMARY]),
    "DescribeJobQueues": (("queue", "list"), [QUEUE]),
    "ListQuotaShares": (("share", "list"), [SHARE]),
    "DescribeQuotaShare": pb.DescribeQuotaShareResponse(quota_share=SHARE, oversubscribed=True),
    "GetJobQueueSnapshot": SNAPSHOT,
    "CreateServiceEnvironment": pb.CreateServiceEnvironmentResponse(
        service_environment_name="env", service_environment_arn=arns.service_environment("env")
    ),
}


def old_json(sample: Any) -> Any:
    """What `qm` printed before: protobuf's JSON with the proto field names, lists bare."""

    def render(message: Message) -> Any:
        return json_format.MessageToDict(message, preserving_proto_field_name=True)

    if isinstance(sample, tuple):
        return [render(m) for m in sample[1]]
    return render(sample)


def new_json(sample: Any) -> Any:
    if isinstance(sample, tuple):
        return listing(LISTED_AS[sample[0]], sample[1])
    return aws_output(sample)


@pytest.mark.parametrize("operation", sorted(SAMPLES))
def test_the_check_passes_the_aws_shape_and_refuses_the_old_json(operation: str) -> None:
    sample = SAMPLES[operation]
    assert output_mismatches(new_json(sample), operation) == []
    assert our_own_mismatches(new_json(sample)) == []
    assert output_mismatches(old_json(sample), operation) != []


# ---- every command against admission ---------------------------------------------------


async def test_every_commands_json_has_the_aws_shape(
    admission: Client, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    c = admission
    base = ["--address", f"127.0.0.1:{c.port}", "--insecure"]
    ran: set[tuple[str, str]] = set()

    async def qm(*words: str) -> Any:
        code = await asyncio.to_thread(main, [*base, *words])
        out, err = capsys.readouterr()
        assert code == 0, (words, err)
        ran.add((words[0], words[1]))
        return json.loads(out) if out.lstrip().startswith(("{", "[")) else out

    # given: resources made by `qm`, a RUNNING job on h1, two RUNNABLE jobs
    shown: dict[str, Any] = {
        "CreateServiceEnvironment": await qm("env", "create", "env", "--capacity", f"{UNIT}=2"),
        "CreateSchedulingPolicy": await qm("policy", "create", "fifo"),
        "CreateJobQueue": await qm("queue", "create", "q", "--env", "env", "--policy", "fifo"),
        "CreateQuotaShare": await qm("share", "create", "q", "QS1", "--capacity", f"{UNIT}=1"),
    }
    await qm("share", "create", "q", "QS2", "--capacity", f"{UNIT}=1", "--strategy", "reserve")
    await qm("tags", "add", arns.job_queue("q"), "team=a")
    running = await submit(c, job("running", tags={"team": "a"}))
    await submit(c, job("waiting", "QS2"))
    await submit(c, job("waiting-too", "QS2"))
    seq = await run_job(c, running, finish=False)
    await c.call(c.jobs.ListServiceJobs, pb.ListServiceJobsRequest(job_queue="q"), min_seq=seq)
    jobs_file = tmp_path / "jobs.yaml"
    jobs_file.write_text("- name: many\n  command: ['true']\n")

    # when: every command that prints an answer, as JSON
    shown |= {
        "UpdateServiceEnvironment": await qm("env", "update", "env", "--capacity", f"{UNIT}=4"),
        "DescribeServiceEnvironments": await qm("env", "list", "-o", "json"),
        "DescribeSchedulingPolicies": await qm("policy", "list", "-o", "json"),
        "UpdateJobQueue": await qm("queue", "update", "q", "--priority", "5"),
        "DescribeJobQueues": await qm("queue", "list", "-o", "json"),
        "GetJobQueueSnapshot": await qm("queue", "snapshot", "q", "-o", "json"),
        "UpdateQuotaShare": await qm(
            "share", "update", "q", "QS1", "--capacity", f"{UNIT}=1", "--borrow-limit", "50"
        ),
        "DescribeQuotaShare": await qm("share", "describe", "q", "QS1"),
        "ListQuotaShares": await qm("share", "list", "q", "-o", "json"),
        "DescribeServiceJob": await qm("job", "describe", running),
        "ListServiceJobs": await qm("job", "list", "q", "-o", "json"),
        "ListTagsForResource": await qm("tags", "list", arns.job_queue("q"), "-o", "json"),
    }
    many = ["--queue", "q", "--share", "QS1", "--quiet", "-o", "json"]
    submitted = await qm("job", "submit-many", str(jobs_file), *many)
    dry_run = ["q", "--share", "QS1", "--name", "probe", "--dry-run", "--", "true"]
    our_own = {
        "job submit --dry-run": await qm("job", "submit", *dry_run),
        "pools list": await qm("pools", "list", "-o", "json"),
        "pools update": await qm("pools", "update", running, "--keep-alive", "600"),
        "nodes list": await qm("nodes", "list", "-o", "json"),
        "nodes drain": await qm("nodes", "drain", "h1"),
        "nodes undrain": await qm("nodes", "undrain", "h1"),
    }

    # then: AWS's names and types wherever AWS has the member; camelCase everywhere
    for operation, output in shown.items():
        assert output_mismatches(output, operation) == [], operation
        assert our_own_mismatches(output) == [], operation
    for output in submitted:  # one SubmitServiceJob output per submitted job
        assert output_mismatches(output, "SubmitServiceJob") == []
    for command, output in our_own.items():
        assert our_own_mismatches(output) == [], command
    assert set(LISTED_AS) <= ran  # every list command was run as JSON here

    detail = shown["DescribeServiceJob"]
    assert (detail["jobId"], detail["status"]) == (running, "RUNNING")
    assert detail["isTerminated"] is False
    assert detail["latestAttempt"]["hostIds"] == ["h1"] and detail["tags"] == {"team": "a"}
    assert abs(detail["createdAt"] - time.time() * 1000) < 60_000  # ms, not s
    assert detail["createdAt"] <= detail["startedAt"]
    summaries = shown["ListServiceJobs"]["jobSummaryList"]
    assert {j["jobName"]: j["status"] for j in summaries} == {
        "running": "RUNNING",
        "waiting": "RUNNABLE",
        "waiting-too": "RUNNABLE",
    }
    front = shown["GetJobQueueSnapshot"]["frontOfQueue"]["jobs"]
    assert [j["jobName"] for j in front] == ["waiting", "waiting-too"]
    assert all(j["jobArn"] == arns.job(j["jobId"]) for j in front)
    assert shown["ListTagsForResource"] == {"tags": {"team": "a"}}
    assert [q["priority"] for q in shown["DescribeJobQueues"]["jobQueues"]] == [5]
    assert our_own["nodes drain"]["node"]["state"] == "DRAINED"
    assert [s["jobName"] for s in submitted] == ["many"]
