"""`qm aws-env`: a `qm up` stack's AWS surface, as `export` lines for a shell.

`eval "$(qm aws-env)"` points the AWS CLI, boto3 and the SageMaker SDK at the stack:
- the object store the default execution role maps to (`AWS_ENDPOINT_URL_S3`,
  from `<data-dir>/credentials/roles.json`);
- while `qm up` serves it (`stack.json`), the AWS-compatible endpoint for Batch,
  SageMaker, IAM and STS (`AWS_ENDPOINT_URL` and the four service variables), the
  admin's access key (or `--key`'s), `AWS_CA_BUNDLE` when it serves TLS, and
  `SAGEMAKER_USER_CONFIG_OVERRIDE` (the SDK's config naming the stack's bucket: the
  SDK otherwise names it from AWS's own STS endpoint, which no variable redirects).
It reads files only; a stack that is not running exports the object store alone.
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


def credentials_dir(data_dir: str | None) -> Path:
    """As qm finds its credentials: `--data-dir`, `$QM_CREDENTIALS_DIR`, `$QM_DATA_DIR`,
    then `./.qm-data` (`qm aws-env`, `qm keys`)."""
    if data_dir:
        return Path(data_dir) / "credentials"
    if directory := os.environ.get("QM_CREDENTIALS_DIR"):
        return Path(directory)
    return Path(os.environ.get("QM_DATA_DIR") or DEFAULT_DATA_DIR) / "credentials"


def _roles_file(args: argparse.Namespace) -> Path:
    """`--roles-file`, else the role map in the credentials dir."""
    if args.roles_file:
        return Path(args.roles_file)
    return credentials_dir(args.data_dir) / ROLES_FILE


def store_values(access: S3Access) -> dict[str, str]:
    """The variables that reach the store `access` names."""
    return {
        "AWS_ENDPOINT_URL_S3": access.endpoint_url,
        "AWS_ACCESS_KEY_ID": access.access_key_id,
        "AWS_SECRET_ACCESS_KEY": access.secret_access_key,
        "AWS_DEFAULT_REGION": access.region,
    }


def export_lines(values: dict[str, str]) -> list[str]:
    """`export NAME=value` lines (values shell-quoted; empty ones left out)."""
    return [f"export {name}={shlex.quote(value)}" for name, value in values.items() if value]


API_SERVICES = ("BATCH", "SAGEMAKER", "IAM", "STS")
SDK_CONFIG_FILE = "sagemaker-config.yaml"  # beside roles.json, written by `qm up`


def api_values(
    data_dir: Path, store: S3Access, key_id: str | None
) -> tuple[dict[str, str], str | None]:
    """The endpoint's variables of the stack in `data_dir` (none when it does not serve
    one), or why they cannot be given."""
    from quartermaster.cli.bus import read_stack_file

    try:
        stack = read_stack_file(data_dir)
    except OSError as err:
        return {}, str(err)
    if stack is None or not stack.aws_url:
        return (
            {},
            None if key_id is None else f"no AWS endpoint in {data_dir} (is `qm up` running?)",
        )
    credentials = data_dir / "credentials"
    values = {"AWS_ENDPOINT_URL": stack.aws_url}
    values |= {f"AWS_ENDPOINT_URL_{name}": stack.aws_url for name in API_SERVICES}
    key = _access_key(credentials, key_id)
    if key_id is None and isinstance(key, tuple) and not stack.store_takes_api_keys:
        # One key pair serves every service: keep the store's, or S3 stops working.
        print(
            "qm: note: the object store does not accept the stack's access keys, so these "
            "are the store's, which the AWS endpoint refuses; `qm aws-env --key ID` signs "
            "with a key of the endpoint instead (then S3 refuses it)",
            file=sys.stderr,
        )
        key = None
    if isinstance(key, str):
        return {}, key
    if key is not None:
        values["AWS_ACCESS_KEY_ID"], values["AWS_SECRET_ACCESS_KEY"] = key
    values["AWS_REGION"] = store.region or "us-east-1"
    if stack.aws_url.startswith("https://"):
        values["AWS_CA_BUNDLE"] = str((credentials / "ca.pem").resolve())
    config = credentials / SDK_CONFIG_FILE
    if config.is_file():
        values["SAGEMAKER_USER_CONFIG_OVERRIDE"] = str(config.resolve())
    return values, None


def _access_key(credentials: Path, key_id: str | None) -> tuple[str, str] | str | None:
    """(id, secret) of `key_id`, else of the admin's key; None: the stack has no keys (it
    takes unsigned requests); a string: why the key cannot be had."""
    from quartermaster.auth.access_keys import AccessKeyError, AccessKeyFile

    keys = AccessKeyFile(credentials)
    try:
        if key_id is not None:
            record = next((r for r in keys.records() if r.access_key_id == key_id), None)
            if record is None:
                return f"no access key {key_id} in {credentials} (see `qm keys list`)"
        else:
            record = keys.admin_key()
            if record is None:
                return None
        return record.access_key_id, keys.secret_of(record)
    except AccessKeyError as err:
        return str(err)


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
    values = store_values(access)
    if not args.roles_file:
        api, problem = api_values(path.parent.parent, access, args.key)
        if problem is not None:
            print(f"qm: error: {problem}", file=sys.stderr)
            return 1
        values |= api
    print("\n".join(export_lines(values)))
    return 0


def register(groups: Any) -> None:
    """Add `aws-env` to `qm`."""
    p: argparse.ArgumentParser = groups.add_parser(
        "aws-env",
        help='the stack\'s object store as shell exports: eval "$(qm aws-env)"',
        description="Print export lines for the store the stack's default execution role "
        "maps to (AWS_ENDPOINT_URL_S3, keys, region) and, while `qm up` runs, its "
        "AWS-compatible endpoint (AWS_ENDPOINT_URL, an access key, AWS_CA_BUNDLE, "
        'SAGEMAKER_USER_CONFIG_OVERRIDE); eval "$(qm aws-env)" sets them in this shell.',
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
    p.add_argument(
        "--key",
        default=None,
        metavar="ACCESS_KEY_ID",
        help="sign with this access key (`qm keys issue`) instead of the admin's",
    )
    p.set_defaults(run=aws_env_command)
