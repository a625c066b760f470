"""A training job's data locations and role, checked by a real admission server.

With `roles_file` set, a job must name one of the role map's roles (and must name
one when it reads or writes S3); a bad channel or role is INVALID_ARGUMENT naming
the field, for a submission and its dry run alike, and nothing is written. The
server reads the file again when it changes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import grpc
import pytest

from qm_admission.settings import SettingsError
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.objectstore import RoleMap, S3Access

from .conftest import Client, Starter
from .test_admission_server import UNIT, field_of, job, rejection, set_up_queue, submit

ROLE = "arn:aws:iam::000000000000:role/quartermaster"
NEW_ROLE = "arn:aws:iam::000000000000:role/team-b"
P = "service_request_payload"
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def payload(**fields: Any) -> str:
    return json.dumps({"ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1}, **fields})


def s3_channel(uri: str = "s3://data/train/") -> dict[str, Any]:
    return {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": uri}}}


def write_roles(path: Path, *roles: str) -> None:
    RoleMap(roles={r: S3Access() for r in roles}, default_role=roles[0]).save(path)


@pytest.fixture
def roles_file(tmp_path: Path) -> Path:
    path = tmp_path / "roles.json"
    write_roles(path, ROLE)
    return path


async def refused(c: Client, request: pb.SubmitServiceJobRequest) -> tuple[Any, str | None]:
    before = await c.log.last_seq()
    error = await rejection(c.call(c.jobs.SubmitServiceJob, request))
    assert await c.log.last_seq() == before  # nothing written
    return error.code(), field_of(error)


@pytest.mark.parametrize("dry_run", [False, True], ids=["submit", "dry-run"])
@pytest.mark.parametrize(
    ("doc", "field"),
    [
        pytest.param({"RoleArn": NEW_ROLE}, f"{P}.RoleArn", id="unknown-role"),
        pytest.param({"InputDataConfig": [s3_channel()]}, f"{P}.RoleArn", id="s3-without-role"),
        pytest.param(
            {"RoleArn": ROLE, "InputDataConfig": [{**s3_channel(), "InputMode": "Pipe"}]},
            f"{P}.InputDataConfig[0].InputMode",
            id="pipe-mode",
        ),
        pytest.param(
            {"RoleArn": ROLE, "InputDataConfig": [s3_channel("s3://No_Bucket/x")]},
            f"{P}.InputDataConfig[0].DataSource.S3DataSource.S3Uri",
            id="bad-s3-uri",
        ),
    ],
)
async def test_a_bad_role_or_channel_is_refused_naming_the_field_and_writes_nothing(
    start_admission: Starter, roles_file: Path, doc: dict[str, Any], field: str, dry_run: bool
) -> None:
    c = await start_admission(roles_file=str(roles_file))
    await set_up_queue(c)

    request = job(service_request_payload=payload(**doc), dry_run=dry_run)

    assert await refused(c, request) == (INVALID, field)


async def test_a_role_added_to_the_file_is_accepted_without_a_restart(
    start_admission: Starter, roles_file: Path
) -> None:
    c = await start_admission(roles_file=str(roles_file))
    await set_up_queue(c)
    request = job(service_request_payload=payload(RoleArn=NEW_ROLE, InputDataConfig=[s3_channel()]))
    assert await refused(c, request) == (INVALID, f"{P}.RoleArn")

    write_roles(roles_file, ROLE, NEW_ROLE)
    later = roles_file.stat().st_mtime_ns + 1_000_000_000  # a clock too coarse to see the change
    os.utime(roles_file, ns=(later, later))

    assert await submit(c, request)


async def test_without_a_roles_file_any_role_is_accepted(admission: Client) -> None:
    await set_up_queue(admission)
    request = job(service_request_payload=payload(RoleArn=NEW_ROLE, InputDataConfig=[s3_channel()]))

    assert await submit(admission, request)


async def test_a_roles_file_that_cannot_be_read_stops_the_start(
    start_admission: Starter, tmp_path: Path
) -> None:
    (tmp_path / "roles.json").write_text("not json")

    with pytest.raises(SettingsError, match=r"roles\.json"):
        await start_admission(roles_file=str(tmp_path / "roles.json"))
