"""`qm keys issue|list|revoke`: the AWS access keys of a `qm up` stack.

A key speaks for a principal as a bearer token does (admin, member of shares,
auditor): requests to the AWS-compatible endpoint signed with it (SigV4) are
authorized as that principal. The secret is printed once, by `issue`; the key file
keeps it sealed (`quartermaster.auth.access_keys`). Admission reads the file again
when it changes: an issued key works and a revoked one stops at once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import sys
import time
from typing import Any

from quartermaster.cli.aws_env import credentials_dir
from quartermaster.cli.options import principal_arguments
from quartermaster.cli.tables import render
from quartermaster.client.credentials import DEFAULT_DATA_DIR


def _issue(args: argparse.Namespace) -> int:
    from quartermaster.auth import Role, ShareRef
    from quartermaster.auth.access_keys import AccessKeyError, AccessKeyFile

    directory = credentials_dir(args.data_dir)
    if not directory.is_dir():
        print(f"qm: error: no stack credentials in {directory}: run `qm up` first", file=sys.stderr)
        return 1
    try:
        shares = [ShareRef.parse(s) for s in args.share]
        record, secret = AccessKeyFile(directory).add(
            args.subject, [Role(args.role)], shares, now=time.time()
        )
    except (ValueError, AccessKeyError) as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return 2
    print(f"export AWS_ACCESS_KEY_ID={shlex.quote(record.access_key_id)}")
    print(f"export AWS_SECRET_ACCESS_KEY={shlex.quote(secret)}")
    print("# the secret is shown this once; `qm keys revoke` ends the key", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    from quartermaster.auth.access_keys import AccessKeyError, AccessKeyFile

    try:
        records = AccessKeyFile(credentials_dir(args.data_dir)).records()
    except AccessKeyError as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return 1
    rows = [
        (
            r.access_key_id,
            r.subject,
            ",".join(r.roles),
            ",".join(r.shares) or "-",
            dt.datetime.fromtimestamp(r.created_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
        )
        for r in records
    ]
    print(render(("ACCESS KEY ID", "SUBJECT", "ROLE", "SHARES", "CREATED (UTC)"), rows))
    return 0


def _revoke(args: argparse.Namespace) -> int:
    from quartermaster.auth.access_keys import AccessKeyError, AccessKeyFile

    try:
        record = AccessKeyFile(credentials_dir(args.data_dir)).revoke(args.access_key_id)
    except AccessKeyError as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return 1
    print(f"revoked {record.access_key_id} ({record.subject})")
    return 0


def register(groups: Any) -> None:
    """Add `keys` to `qm`."""
    keys = groups.add_parser("keys", help="AWS access keys (SigV4) of a `qm up` stack")
    commands = keys.add_subparsers(dest="command", required=True)
    data_dir_help = f"qm up's data dir (default: $QM_DATA_DIR, else ./{DEFAULT_DATA_DIR})"

    issue = commands.add_parser("issue", help="a new key pair, printed once as export lines")
    issue.add_argument("--data-dir", default=None, help=data_dir_help)
    principal_arguments(issue, "key")
    issue.set_defaults(run=_issue)

    listing = commands.add_parser("list", help="the keys (never their secrets)")
    listing.add_argument("--data-dir", default=None, help=data_dir_help)
    listing.set_defaults(run=_list)

    revoke = commands.add_parser("revoke", help="end a key at once")
    revoke.add_argument("access_key_id")
    revoke.add_argument("--data-dir", default=None, help=data_dir_help)
    revoke.set_defaults(run=_revoke)
