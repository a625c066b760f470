"""`qm up` and `qm demo`: run the stack in this process until Ctrl-C (or the demo ends)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quartermaster import telemetry
from quartermaster.audit.errors import AuditError
from quartermaster.auth import Role, ShareRef, TokenError
from quartermaster.auth.local import LocalCredentials
from quartermaster.cli.dependencies import import_error_in, missing_dependency
from quartermaster.cli.options import DefaultsFormatter, principal_arguments
from quartermaster.embedded.errors import PermanentEmbeddedServerError
from quartermaster.telemetry import LogFormat, SpanExporterKind, TelemetrySettings, traces
from quartermaster_stack.console import live_jobs, port_taken, stop_message
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.stack import SERVICES, Stack

METRICS_PORT = 9180  # `qm up`'s /metrics; next to the exporters' range, clear of Prometheus'


DEFAULT_AWS_PORT = 50052  # beside gRPC's 50051


def settings_from(args: argparse.Namespace, **overrides: object) -> StackSettings:
    fields: dict[str, object] = {
        "data_dir": Path(args.data_dir),
        "nodes": args.nodes,
        "node_processes": args.node_processes,
        "instance_type": args.instance_type,
        "runtime": args.runtime,
        "job_path": args.job_path,
        "registry": args.registry,
        "grpc_port": args.grpc_port,
        "aws_port": args.aws_port,
        "nats_url": args.nats_url,
        "postgres_url": args.postgres_url,
        "gpus_per_node": args.gpus_per_node,
        "secure": not args.insecure,
        "metrics_port": args.metrics_port or None,  # 0: off
        "restore_from": getattr(args, "restore", None),  # `qm up` only
        **_object_store_fields(args),
    }
    fields.update(overrides)
    return StackSettings(**fields)  # type: ignore[arg-type]


def _object_store_fields(args: argparse.Namespace) -> dict[str, object]:
    """`--s3-url`'s keys and region: the flags, else the standard AWS_* variables."""
    env = os.environ
    fields: dict[str, object] = {"s3_url": args.s3_url, "roles_file": args.roles_file}
    if args.s3_url:
        fields["s3_access_key_id"] = args.s3_access_key_id or env.get("AWS_ACCESS_KEY_ID", "")
        fields["s3_secret_access_key"] = args.s3_secret_access_key or env.get(
            "AWS_SECRET_ACCESS_KEY", ""
        )
        region = args.s3_region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            fields["s3_region"] = region
    return fields


def object_store_line(stack: Stack) -> str | None:
    """Where the default execution role's objects go, and how a shell reaches them."""
    if stack.object_store is None or stack.roles_file is None:
        return None
    where = stack.object_store.endpoint_url or "AWS S3"
    if stack.settings.roles_file is not None:  # the operator's map: no bucket made
        hint = f"qm aws-env --roles-file {_quoted(stack.roles_file)}"
    else:
        where += f", bucket s3://{stack.settings.s3_bucket}"
        default = stack.data_dir == Path(".qm-data").resolve()
        hint = "qm aws-env" + ("" if default else f" --data-dir {_quoted(stack.data_dir)}")
    return f'object store: {where} (eval "$({hint})")'


def _aws_env_hint(stack: Stack) -> str:
    default = stack.data_dir == Path(".qm-data").resolve()
    return "qm aws-env" + ("" if default else f" --data-dir {_quoted(stack.data_dir)}")


def _quoted(path: Path) -> str:
    return shlex.quote(str(path))


async def up(settings: StackSettings) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    async with Stack(settings) as stack:
        if (done := stack.restored) is not None:
            moved = f"; subjects moved from prefix {done.moved_from}" if done.moved_from else ""
            print(
                f"restored {done.messages} messages ({done.events} events) from "
                f"{settings.restore_from}{moved}",
                flush=True,
            )
        metrics = f"  metrics {stack.metrics_url}" if stack.metrics_url else ""
        print(
            f"Quartermaster is up: gRPC {stack.address}{metrics}  (nats {stack.nats_url}; "
            f"{settings.nodes} x {settings.instance_type} hosts; data in {stack.data_dir})",
            flush=True,
        )
        if stack.credentials_dir is not None:
            print(
                f"secured: TLS + bearer tokens; CA and admin token in {stack.credentials_dir} "
                "(qm and the Python client find them there, or via QM_CREDENTIALS_DIR)",
                flush=True,
            )
        else:
            print("INSECURE: plaintext gRPC, every caller is an admin", flush=True)
        if (store := object_store_line(stack)) is not None:
            print(store, flush=True)
        if stack.aws_url:
            print(
                f"AWS APIs: {stack.aws_url} (Batch, SageMaker, IAM, STS; "
                f'eval "$({_aws_env_hint(stack)})" points boto3 and the SageMaker SDK at it)',
                flush=True,
            )
        where = "" if stack.credentials_dir is None else f" --credentials {stack.credentials_dir}"
        print(f"try: qm --address {stack.address}{where} nodes list   (Ctrl-C stops)", flush=True)
        await stopping.wait()
        print(stop_message(live_jobs(stack), settings.runtime, stack.data_dir), flush=True)
    print("Quartermaster stopped; `qm up` on the same --data-dir resumes.", flush=True)


async def demo(settings: StackSettings) -> None:
    from quartermaster_stack.demo import play

    async with Stack(settings) as stack:
        metrics = f"  metrics {stack.metrics_url}" if stack.metrics_url else ""
        print(f"Quartermaster is up: gRPC {stack.address}{metrics}", flush=True)
        await asyncio.to_thread(play, stack.address, settings.instance_type, stack.credentials_dir)


def _ports_taken(settings: StackSettings) -> bool:
    """Say which port cannot be listened on, before anything starts."""
    for port, flag in ((settings.grpc_port, "--grpc-port"), (settings.aws_port, "--aws-port")):
        if port > 0 and (taken := port_taken(port)) is not None:
            print(f"qm: error: {taken}: stop it, or pick another with {flag}", file=sys.stderr)
            return True
    return False


def _up(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if _ports_taken(settings):
        return 2
    asyncio.run(up(settings))
    return 0


def _demo(args: argparse.Namespace) -> int:
    # The demo needs 3 hosts and short grace periods so preemptions show quickly.
    data_dir = Path(args.data_dir) / "demo"
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(data_dir)
    settings = settings_from(args, data_dir=data_dir, nodes=3, stop_grace_seconds=3.0)
    if _ports_taken(settings):
        return 2
    asyncio.run(demo(settings))
    return 0


def _failing_in_one_line(
    run: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """A missing or broken dependency, or a server that cannot start here (its binary
    missing), is one line naming what to install, and exit status 1: no traceback. So is
    a `--restore` that cannot be done (a bad file, a stream that is not empty)."""

    def wrapped(args: argparse.Namespace) -> int:
        command = f"qm {args.group}"
        try:
            return run(args)
        except AuditError as err:
            print(f"qm: error: {command} --restore: {err}", file=sys.stderr)
            return 1
        except (ImportError, PermanentEmbeddedServerError) as err:
            cause = import_error_in(err)
            line = missing_dependency(command, cause) if cause is not None else f"{command}: {err}"
            print(f"qm: error: {line}", file=sys.stderr)
            return 1

    return wrapped


def _logging(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Logs (warnings up, text or `--log-format json`) and, with `--otel-exporter`, spans
    of every service of the stack, flushed when it stops."""

    def wrapped(args: argparse.Namespace) -> int:
        settings = TelemetrySettings(
            log_format=args.log_format,
            log_level="WARNING",
            otel_exporter=getattr(args, "otel_exporter", SpanExporterKind.OFF),
            otel_endpoint=getattr(args, "otel_endpoint", ""),
        )
        try:
            telemetry.start("qm-stack", settings, traced=sorted(set(SERVICES.values())))
        except traces.TracingUnavailable as err:
            print(f"qm: error: {err}", file=sys.stderr)
            return 2
        try:
            return run(args)
        finally:
            traces.shutdown()

    return wrapped


def _stack_flags(p: argparse.ArgumentParser) -> None:
    d = StackSettings()
    p.add_argument("--nodes", type=int, default=d.nodes, help="node agents (emulated GPU hosts)")
    p.add_argument(
        "--node-processes",
        action="store_true",
        help="run each node agent in a process of its own, as on a host of its own",
    )
    p.add_argument("--instance-type", default=d.instance_type, help="instance type of every host")
    p.add_argument(
        "--runtime",
        type=str.lower,
        choices=("process", "docker"),
        default=d.runtime,
        help="how jobs run",
    )
    p.add_argument(
        "--job-path",
        default=d.job_path,
        help="PATH of process-runtime jobs (default: $QM_NODE_JOB_PATH, else this shell's PATH)",
    )
    p.add_argument(
        "--registry",
        default=d.registry,
        help="docker runtime: registry a cold start pulls images from, e.g. 127.0.0.1:5000",
    )
    p.add_argument("--grpc-port", type=int, default=d.grpc_port, help="admission gRPC port")
    p.add_argument(
        "--aws-port",
        type=int,
        default=DEFAULT_AWS_PORT,
        help="the AWS-compatible endpoint (Batch, SageMaker, IAM, STS): -1 off, 0 any free port",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=METRICS_PORT,
        help="Prometheus /metrics of every service, on 127.0.0.1 (0: off)",
    )
    p.add_argument("--data-dir", default=str(d.data_dir), help="log, projection and credentials")
    telemetry.add_arguments(p, default=LogFormat.TEXT)
    p.add_argument(
        "--otel-exporter",
        type=SpanExporterKind,
        choices=[k for k in SpanExporterKind if k],
        default=argparse.SUPPRESS,  # off
        help="send OpenTelemetry spans: otlp (to --otel-endpoint) or console; off if not given",
    )
    p.add_argument(
        "--otel-endpoint",
        default=argparse.SUPPRESS,
        help="OTLP gRPC endpoint of --otel-exporter otlp; the exporter's own if not given",
    )
    p.add_argument("--nats-url", default=None, help="use this NATS server instead of embedding one")
    p.add_argument(
        "--postgres-url", default=None, help="use this Postgres instead of embedding one"
    )
    p.add_argument(
        "--gpus-per-node", type=int, default=None, help="GPUs per host (None: detect, nvidia-smi)"
    )
    store = p.add_argument_group(
        "object store",
        "the store the default execution role maps to; default: SeaweedFS embedded under "
        "--data-dir, on 127.0.0.1, with keys made there",
    )
    store.add_argument(
        "--s3-url", default=None, help="use the S3 API at this URL instead of embedding a store"
    )
    store.add_argument(
        "--s3-access-key-id", default=None, help="--s3-url's key (default: $AWS_ACCESS_KEY_ID)"
    )
    store.add_argument(
        "--s3-secret-access-key",
        default=None,
        help="--s3-url's secret (default: $AWS_SECRET_ACCESS_KEY)",
    )
    store.add_argument(
        "--s3-region",
        default=None,
        help="--s3-url's region (default: $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1)",
    )
    store.add_argument(
        "--roles-file",
        type=Path,
        default=None,
        help="an operator's role map (execution role ARN -> store credentials), used as is: "
        "no store is started and none is written",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext development stack: no TLS, no tokens, no NATS users",
    )


def _token_issue(args: argparse.Namespace) -> int:
    creds = LocalCredentials(Path(args.data_dir) / "credentials")
    if not creds.signing_key.exists():
        print(
            f"qm: error: no signing key in {creds.directory}: "
            f"run `qm up --data-dir {args.data_dir}` once first",
            file=sys.stderr,
        )
        return 2
    try:
        shares = [ShareRef.parse(s) for s in args.share]
        token = creds.issue(
            args.subject,
            [Role(args.role)],
            shares,
            issued_at=time.time(),
            lifetime_s=args.lifetime_days * 86400,
        )
    except (ValueError, TokenError) as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return 2
    print(token)
    return 0


def register(groups: Any) -> None:
    """Entry point (`quartermaster.cli`): adds `qm up` and `qm demo` to the library's `qm`."""
    # qm's own formatter: `(default: X)` unless the help says its default itself.
    formatter = DefaultsFormatter
    up_ = groups.add_parser(
        "up", help="run the whole stack on this machine", formatter_class=formatter
    )
    _stack_flags(up_)
    up_.add_argument(
        "--restore",
        type=Path,
        default=None,
        metavar="FILE",
        help="load this exported log (`qm log export`) into a new --data-dir's empty stream "
        "before the services start; refused where the stream holds anything",
    )
    up_.set_defaults(run=_failing_in_one_line(_logging(_up)))
    demo_ = groups.add_parser(
        "demo", help="bring the stack up and play the seed scenario", formatter_class=formatter
    )
    _stack_flags(demo_)
    demo_.set_defaults(run=_failing_in_one_line(_logging(_demo)))

    token = groups.add_parser("token", help="bearer tokens of a `qm up` stack")
    tokens = token.add_subparsers(dest="command", required=True)
    issue = tokens.add_parser(
        "issue",
        help="print a new signed token on standard output",
        formatter_class=formatter,
    )
    issue.add_argument("--data-dir", default=str(StackSettings().data_dir), help="qm up's data dir")
    principal_arguments(issue, "token")
    issue.add_argument("--lifetime-days", type=float, default=365.0, help="validity")
    issue.set_defaults(run=_token_issue)
