"""`qm up`'s object store as a user reaches it: `eval "$(qm aws-env)"`, then boto3."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import StackFactory
from qm_up import VENV_BIN, qm_up

from quartermaster.client.trainer import DEFAULT_ROLE
from quartermaster.embedded.seaweedfs import EmbeddedSeaweedFS
from quartermaster.objectstore import RoleMap

# Run by a shell after `eval "$(qm aws-env)"`: boto3 configured by the environment only.
BOTO3_PUT_AND_LIST = """
import boto3
s3 = boto3.client("s3")
s3.put_object(Bucket="quartermaster", Key="from-the-shell.txt", Body=b"hello")
print(sorted(o["Key"] for o in s3.list_objects_v2(Bucket="quartermaster")["Contents"]))
"""


def _in_a_shell(env: dict[str, str], data_dir: Path) -> str:
    script = (
        f'eval "$({VENV_BIN / "qm"} aws-env --data-dir {data_dir})" && '
        f'"{sys.executable}" -c "$BOTO3"'
    )
    # The shell has no AWS_* of its own: everything boto3 uses comes from the eval.
    clean = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    done = subprocess.run(
        ["bash", "-c", script],
        env={**clean, "BOTO3": BOTO3_PUT_AND_LIST},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_qm_up_serves_s3_that_aws_env_points_boto3_at(tmp_path: Path) -> None:
    data_dir = tmp_path / "qm-data"
    with qm_up(data_dir) as stack:
        lines = [line for line in stack.output if line.startswith("object store: ")]
        assert lines and "bucket s3://quartermaster" in lines[0]
        assert "qm aws-env" in lines[0]

        assert _in_a_shell(stack.env, data_dir).strip() == "['from-the-shell.txt']"

        roles = RoleMap.load(data_dir / "credentials" / "roles.json")
        assert roles.default_role == DEFAULT_ROLE
        access = roles.default_access
        assert access is not None and access.endpoint_url.startswith("http://127.0.0.1:")


def test_qm_up_with_s3_url_maps_the_default_role_to_that_store(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    with EmbeddedSeaweedFS(tmp_path / "external", tmp_path / "external-keys") as external:
        keys = external.access
        stack = make_stack(
            nodes=1,
            object_store=True,
            s3_url=external.url,
            s3_access_key_id=keys.access_key_id,
            s3_secret_access_key=keys.secret_access_key,
        )
        data_dir = stack.stack.data_dir

        roles = RoleMap.load(data_dir / "credentials" / "roles.json")
        assert roles.access(DEFAULT_ROLE) == keys
        assert not (data_dir / "s3").exists()  # no store of its own
        out = _in_a_shell(dict(os.environ), data_dir)
        assert out.strip() == "['from-the-shell.txt']"  # the bucket was made there
