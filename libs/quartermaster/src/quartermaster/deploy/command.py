"""`qm deploy bootstrap` (also `python -m quartermaster.deploy bootstrap`, in the images).

One command for both deployments: compose runs it as a one-shot before the NATS
servers (files onto volumes) and again, with `--nats-url`, once they are up (the
stream); the Kubernetes Job runs it with `--k8s-secrets --nats-url` (files into
Secrets, then the stream). Every step keeps what exists, so reruns are safe.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from quartermaster.deploy import kube

if TYPE_CHECKING:  # the bus extra (nats-py) is imported only when the command runs: `qm`
    # registers this command in every install, the client-only one included
    from quartermaster.deploy.secrets import DeployPlan
    from quartermaster.embedded.nats_auth import BusLayout

log = logging.getLogger("qm.deploy")


def add_arguments(p: argparse.ArgumentParser) -> None:
    def names(text: str) -> list[str]:
        return [name.strip() for name in text.split(",") if name.strip()]

    p.add_argument("--out", required=True, type=Path, help="directory of the parts")
    p.add_argument(
        "--host", dest="hosts", action="extend", type=names, default=[], metavar="ID[,ID]",
        help="a node agent's host id (QM_NODE_HOST_ID): one NATS user each (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--admission-name", dest="admission_names", action="extend", type=names, default=[],
        metavar="NAME", help="a name clients reach admission by (default: localhost, 127.0.0.1)",
    )  # fmt: skip
    p.add_argument(
        "--nats-name", dest="nats_names", action="extend", type=names, default=[],
        metavar="NAME", help="a name the NATS servers are reached by, clients' and routes' "
        "(default: localhost, 127.0.0.1)",
    )  # fmt: skip
    p.add_argument(
        "--route", dest="routes", action="extend", type=names, default=[], metavar="URL",
        help="nats://HOST:PORT of each server's cluster port (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--nats-dir", default="/etc/nats-secrets",
        help="where the NATS servers mount part nats (the config's file paths)",
    )  # fmt: skip
    p.add_argument(
        "--nats-url", default="",
        help="then create the stream and buckets here, as admin (waits for the servers)",
    )  # fmt: skip
    p.add_argument("--replicas", type=int, default=1, help="the stream's and buckets' replicas")
    p.add_argument("--wait-s", type=float, default=300.0, help="how long to wait for NATS")
    p.add_argument("--stream", default="QM", help="the stream's name")
    p.add_argument("--subject-prefix", default="qm", help="the services' subject prefix")
    p.add_argument("--lease-bucket", default="qm-leases", help="the scheduler's lease bucket")
    p.add_argument("--snapshot-bucket", default="qm-snapshots", help="its snapshot bucket")
    p.add_argument(
        "--k8s-secrets", action="store_true",
        help="read Secret qm-bootstrap-credentials first, then write Secret "
        "qm-bootstrap-<part> per part (in a pod, as its ServiceAccount)",
    )  # fmt: skip
    p.add_argument("--k8s-namespace", default="", help="default: the pod's namespace")
    p.add_argument("--k8s-api", default=kube.IN_CLUSTER_API, help="the API server")


def plan_of(args: argparse.Namespace) -> DeployPlan:
    from quartermaster.deploy.secrets import DeployPlan
    from quartermaster.embedded.nats_auth import BusLayout

    default = DeployPlan(hosts=())
    return DeployPlan(
        hosts=tuple(dict.fromkeys(args.hosts)),
        admission_names=tuple(args.admission_names) or default.admission_names,
        nats_names=tuple(args.nats_names) or default.nats_names,
        routes=tuple(args.routes),
        nats_dir=args.nats_dir,
        layout=BusLayout(
            stream=args.stream,
            subject_prefix=args.subject_prefix,
            lease_bucket=args.lease_bucket,
            snapshot_bucket=args.snapshot_bucket,
        ),
    )


def run(args: argparse.Namespace) -> int:
    from quartermaster.deploy.secrets import CREDENTIALS, PARTS, ensure, part_files, put_files

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        plan = plan_of(args)
        secrets_api = None
        if args.k8s_secrets:
            secrets_api = kube.SecretsApi.in_cluster(args.k8s_namespace, args.k8s_api)
            kept = secrets_api.get(kube.secret_name(CREDENTIALS))
            if kept:
                put_files(args.out, CREDENTIALS, kept)
        ensure(args.out, plan, dt.datetime.now(dt.UTC))
        log.info("parts ready in %s: %s", args.out, ", ".join(PARTS))
        if secrets_api is not None:
            for part in PARTS:
                secrets_api.put(kube.secret_name(part), part_files(args.out, part))
            log.info("Secrets written: %s", ", ".join(kube.secret_name(p) for p in PARTS))
        if args.nats_url:
            asyncio.run(_stream(args.out, args.nats_url, plan.layout, args.replicas, args.wait_s))
    except (OSError, ValueError, kube.KubeError) as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return 1
    return 0


async def _stream(out: Path, url: str, layout: BusLayout, replicas: int, wait_s: float) -> None:
    from quartermaster.deploy.secrets import admin_credentials
    from quartermaster.eventlog.bootstrap import bootstrap

    """The stream and buckets, retried until the cluster has a JetStream leader."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            await asyncio.wait_for(
                bootstrap(url, layout, admin_credentials(out), replicas=replicas), timeout=30
            )
        except Exception as err:  # the servers are starting: anything may fail for a while
            if time.monotonic() > deadline:
                raise OSError(f"stream {layout.stream} at {url}: {err}") from err
            log.info("stream %s not made yet (%s); again in 2 s", layout.stream, err)
            await asyncio.sleep(2)
        else:
            log.info("stream %s and buckets ready (%d replicas)", layout.stream, replicas)
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m quartermaster.deploy")
    commands = parser.add_subparsers(dest="command", required=True)
    add_arguments(commands.add_parser("bootstrap", help=__doc__))
    return run(parser.parse_args(argv))
