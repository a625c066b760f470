"""The real SageMaker SDK v3 and boto3 against `qm up`, changed only by the environment
(`eval "$(qm aws-env)"`): the quota-management notebook's flow and the warm-pool guide's
(docs/examples/aws_sdk/), and a member's key issued while the stack runs."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from qm_up import VENV_BIN, RunningStack, qm_up

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "aws_sdk"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with qm_up(tmp_path_factory.mktemp("aws-sdk") / "qm-data") as running:
        yield running


def in_a_shell(
    stack: RunningStack, command: str, *aws_env_flags: str
) -> subprocess.CompletedProcess[str]:
    """`command` in a shell whose AWS settings all come from `eval "$(qm aws-env)"`."""
    flags = " ".join(shlex.quote(f) for f in aws_env_flags)
    script = f'eval "$({VENV_BIN / "qm"} aws-env --data-dir {stack.data_dir} {flags})" && {command}'
    clean = {k: v for k, v in stack.env.items() if not k.startswith(("AWS_", "SAGEMAKER_"))}
    return subprocess.run(
        ["bash", "-c", script],
        env={**clean, "MEMBER": MEMBER},
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_up_prints_the_aws_endpoint(stack: RunningStack) -> None:
    lines = [line for line in stack.output if line.startswith("AWS APIs: ")]
    assert lines and lines[0].startswith("AWS APIs: https://127.0.0.1:"), stack.output
    env = in_a_shell(stack, "env")
    values = dict(line.split("=", 1) for line in env.stdout.splitlines() if "=" in line)
    assert values["AWS_ENDPOINT_URL"] == values["AWS_ENDPOINT_URL_BATCH"]
    assert values["AWS_ENDPOINT_URL"].startswith("https://")
    assert Path(values["AWS_CA_BUNDLE"]).is_file()
    assert (
        "DefaultS3Bucket: quartermaster"
        in Path(values["SAGEMAKER_USER_CONFIG_OVERRIDE"]).read_text()
    )


def test_quota_management_notebook_with_the_sagemaker_sdk(stack: RunningStack) -> None:
    done = in_a_shell(stack, f"{sys.executable} {EXAMPLES / 'quota_management.py'}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "quota management example: done" in done.stdout
    assert "Resource already exists" in done.stderr  # the helpers ran twice
    assert "The seed scenario played out" in done.stderr


def test_warm_pool_guide_with_the_sagemaker_sdk(stack: RunningStack) -> None:
    done = in_a_shell(stack, f"{sys.executable} {EXAMPLES / 'warm_pools.py'}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    assert "warm pool example: done" in done.stdout
    assert "'Status': 'Reused'" in done.stdout


MEMBER = """
import boto3, json
from botocore.exceptions import ClientError
b = boto3.client("batch")
out = {"who": boto3.client("sts").get_caller_identity()["Arn"]}
try:
    b.create_scheduling_policy(name="not-mine")
except ClientError as err:
    out["create"] = err.response["Error"]["Code"]
s3 = boto3.client("s3")
s3.put_object(Bucket="quartermaster", Key="member.txt", Body=b"m")
out["s3"] = s3.get_object(Bucket="quartermaster", Key="member.txt")["Body"].read().decode()
try:
    s3.create_bucket(Bucket="not-mine")
except ClientError as err:
    out["bucket"] = err.response["Error"]["Code"]
print(json.dumps(out))
"""


def test_a_members_key_issued_while_running(stack: RunningStack) -> None:
    issued = subprocess.run(
        [str(VENV_BIN / "qm"), "keys", "issue", "--data-dir", str(stack.data_dir),
         "--subject", "alice", "--role", "member", "--share", "q/a"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    key = issued.stdout.split("AWS_ACCESS_KEY_ID=", 1)[1].split()[0]
    listed = subprocess.run(
        [str(VENV_BIN / "qm"), "keys", "list", "--data-dir", str(stack.data_dir)],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert key in listed.stdout and "alice" in listed.stdout
    assert "AWS_SECRET_ACCESS_KEY" not in listed.stdout
    deadline = time.monotonic() + 20  # the store accepts a new key within a second or two
    while True:
        done = in_a_shell(stack, f'{sys.executable} -c "$MEMBER"', "--key", key)
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    # the stack's bucket, as its jobs may; no buckets of its own
    assert out == {
        "who": out["who"],
        "create": "AccessDeniedException",
        "s3": "m",
        "bucket": "AccessDenied",
    }
    assert out["who"].endswith(":user/alice")


def test_a_stopped_stack_leaves_no_stack_file(tmp_path: Path) -> None:
    """`stack.json` says where a running `qm up` is: once it stops, `qm aws-env` exports
    the object store's settings only, no endpoint that is gone."""
    data_dir = tmp_path / "qm-data"
    with qm_up(data_dir):
        assert (data_dir / "stack.json").is_file()
    assert not (data_dir / "stack.json").exists()
    env = subprocess.run(
        [str(VENV_BIN / "qm"), "aws-env", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "AWS_ENDPOINT_URL_S3" in env.stdout and "AWS_ENDPOINT_URL=" not in env.stdout
