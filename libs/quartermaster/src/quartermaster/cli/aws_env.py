"""`qm aws-env`: the object store of a `qm up` stack, as `export` lines for a shell.

`eval "$(qm aws-env)"` points the AWS CLI, boto3 and the SageMaker SDK at the store
the stack's default execution role maps to (`<data-dir>/credentials/roles.json`,
written by `qm up`). It reads only that file: no stack needs to be running.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from quartermaster.client.credentials import DEFAULT_DATA_DIR
from quartermaster.objectstore.access import RoleMap, S3Access

ROLES_FILE = "roles.json"  # under <data-dir>/credentials/, beside ca.pem and admin.token
DEFAULT_BUCKET = "quartermaster"  # the bucket `qm up` makes (the SageMaker SDK's default)


def stack_roles_file(data_dir: Path | str) -> Path:
    return Path(data_dir) / "credentials" / ROLES_FILE


def _roles_file(args: argparse.Namespace) -> Path:
    """As qm finds its credentials: `--roles-file`, `--data-dir`, `$QM_CREDENTIALS_DIR`,
    `$QM_DATA_DIR`, then `./.qm-data`."""
    if args.roles_file:
        return Path(args.roles_file)
    if args.data_dir:
        return stack_roles_file(args.data_dir)
    if credentials := os.environ.get("QM_CREDENTIALS_DIR"):
        return Path(credentials) / ROLES_FILE
    return stack_roles_file(os.environ.get("QM_DATA_DIR") or DEFAULT_DATA_DIR)


def export_lines(access: S3Access) -> list[str]:
    """`export NAME=value` lines (values shell-quoted) for the store `access` reaches."""
    values = {
        "AWS_ENDPOINT_URL_S3": access.endpoint_url,
        "AWS_ACCESS_KEY_ID": access.access_key_id,
        "AWS_SECRET_ACCESS_KEY": access.secret_access_key,
        "AWS_DEFAULT_REGION": access.region,
    }
    return [f"export {name}={shlex.quote(value)}" for name, value in values.items() if value]


def aws_env_command(args: argparse.Namespace) -> int:
    path = _roles_file(args)
    if not path.is_file():
        print(
            f"qm: error: no stack's object store here: {path} does not exist "
            "(run `qm up` first, or give the --data-dir it used)",
            file=sys.stderr,
        )
        return 1
    try:
        roles = RoleMap.load(path)
    except ValueError as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return 1
    access = roles.default_access
    if access is None:
        print(
            f"qm: error: {path} maps no default role (default_role {roles.default_role!r})",
            file=sys.stderr,
        )
        return 1
    print("\n".join(export_lines(access)))
    return 0


def register(groups: Any) -> None:
    """Add `aws-env` to `qm`."""
    p: argparse.ArgumentParser = groups.add_parser(
        "aws-env",
        help='the stack\'s object store as shell exports: eval "$(qm aws-env)"',
        description="Print export lines (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION) for the store the stack's default "
        'execution role maps to; eval "$(qm aws-env)" sets them in this shell.',
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="qm up's data dir (default: $QM_CREDENTIALS_DIR's stack, else $QM_DATA_DIR, "
        f"else ./{DEFAULT_DATA_DIR})",
    )
    p.add_argument(
        "--roles-file",
        default=None,
        help=f"this role map instead of <data-dir>/credentials/{ROLES_FILE}",
    )
    p.set_defaults(run=aws_env_command)
