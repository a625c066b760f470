"""`qm deploy bootstrap`: the secrets, NATS config and stream of a compose or Kubernetes
deployment (`quartermaster.deploy`; deploy/README.md)."""

from __future__ import annotations

import argparse
from typing import Any

from quartermaster.deploy.command import add_arguments, run


def register(groups: Any) -> None:
    """Add `deploy bootstrap` to `qm`."""
    deploy = groups.add_parser(
        "deploy", help="deploying on many hosts", description="deploying on many hosts"
    ).add_subparsers(dest="command", required=True, metavar="COMMAND")
    p: argparse.ArgumentParser = deploy.add_parser(
        "bootstrap",
        help="make what a secured deployment needs (CA, certificates, NATS users, token "
        "key, admin token), keeping what exists; optionally the stream",
        description="Make what is missing under OUT/credentials, write one directory per "
        "part (nats, admission, scheduler, warmpool, nodes), and with --nats-url create "
        "the stream as the admin user. Reruns keep every key and password.",
    )
    add_arguments(p)
    p.set_defaults(run=run)
