"""`qm aws-env`: export lines a shell evaluates into exactly the role map's values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from quartermaster.cli.aws_env import stack_roles_file
from quartermaster.cli.main import main as qm
from quartermaster.objectstore import RoleMap, S3Access

ROLE = "arn:aws:iam::000000000000:role/quartermaster"
QM = [sys.executable, "-m", "quartermaster.cli.main"]


def _write_roles(data_dir: Path, access: S3Access) -> None:
    path = stack_roles_file(data_dir)
    path.parent.mkdir(parents=True)
    RoleMap(roles={ROLE: access}, default_role=ROLE).save(path)


def _evaluated(args: list[str], env: dict[str, str]) -> dict[str, str]:
    """The environment of a bash that ran `eval "$(qm aws-env ...)"`."""
    command = " ".join(f"'{word}'" for word in [*QM, "aws-env", *args])
    script = f'eval "$({command})" && env -0'
    out = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, check=True
    ).stdout.decode()
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


def test_the_exports_round_trip_through_a_shell_whatever_the_characters(tmp_path: Path) -> None:
    access = S3Access(
        endpoint_url="http://127.0.0.1:8333/with space",
        access_key_id="QMKEY'quoted\"",
        secret_access_key="s3cr$t`echo no`;$(whoami) \\ end",
        region="eu-west-1",
    )
    _write_roles(tmp_path / "data", access)
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}

    got = _evaluated(["--data-dir", str(tmp_path / "data")], base)

    assert got["AWS_ENDPOINT_URL_S3"] == access.endpoint_url
    assert got["AWS_ACCESS_KEY_ID"] == access.access_key_id
    assert got["AWS_SECRET_ACCESS_KEY"] == access.secret_access_key
    assert got["AWS_DEFAULT_REGION"] == "eu-west-1"


def test_the_stack_is_found_as_qm_finds_its_credentials(tmp_path: Path) -> None:
    _write_roles(tmp_path / "elsewhere", S3Access(endpoint_url="http://127.0.0.1:1"))
    _write_roles(tmp_path / ".qm-data", S3Access(endpoint_url="http://127.0.0.1:2"))
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    credentials = str(tmp_path / "elsewhere" / "credentials")

    by_env = _evaluated([], {**base, "QM_CREDENTIALS_DIR": credentials})
    by_cwd = subprocess.run(
        [*QM, "aws-env"], cwd=tmp_path, env=base, capture_output=True, text=True, check=True
    ).stdout

    assert by_env["AWS_ENDPOINT_URL_S3"] == "http://127.0.0.1:1"
    assert "export AWS_ENDPOINT_URL_S3=http://127.0.0.1:2\n" in by_cwd


def test_no_stack_data_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = qm(["aws-env", "--data-dir", str(tmp_path / "none")])

    err = capsys.readouterr().err
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("qm: error: ")
    assert "qm up" in err


def test_a_map_without_its_default_role_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stack_roles_file(tmp_path)
    path.parent.mkdir()
    RoleMap(roles={ROLE: S3Access()}, default_role="arn:aws:iam::1:role/gone").save(path)

    assert qm(["aws-env", "--data-dir", str(tmp_path)]) == 1
    assert "maps no default role" in capsys.readouterr().err
