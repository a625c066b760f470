"""`qm`: a thin command line over `quartermaster.client`, one subcommand per RPC."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from google.protobuf import json_format

from quartermaster.cli import audit, plugins, usage
from quartermaster.cli import top as top_command
from quartermaster.cli.tables import enum_name, render, when
from quartermaster.client import (
    Quartermaster,
    QuartermasterError,
    TrainingQueue,
    TrainingQueuedJob,
    training_job,
)

Handler = Callable[[Quartermaster, argparse.Namespace], None]


def _capacity(values: Sequence[str]) -> dict[str, int]:
    out = {}
    for value in values:
        unit, _, count = value.partition("=")
        out[unit] = int(count)
    return out


def _show(message: Any) -> None:
    print(
        json.dumps(json_format.MessageToDict(message, preserving_proto_field_name=True), indent=2)
    )


# ---- handlers --------------------------------------------------------------


def env_create(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(c.create_service_environment(a.name, _capacity(a.capacity)))


def env_list(c: Quartermaster, a: argparse.Namespace) -> None:
    rows = []
    for e in c.describe_service_environments():
        for cap in e.capacity or e.capacity_limits:
            rows.append(
                (
                    e.service_environment_name,
                    cap.capacity_unit,
                    cap.max_capacity,
                    getattr(cap, "usable_capacity", "-"),
                    getattr(cap, "in_use", "-"),
                )
            )
    print(render(("ENVIRONMENT", "UNIT", "MAX", "USABLE", "IN USE"), rows))


def policy_create(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(c.create_scheduling_policy(a.name))


def queue_create(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(c.create_job_queue(a.name, a.env, a.policy))


def queue_list(c: Quartermaster, a: argparse.Namespace) -> None:
    rows = [
        (
            q.job_queue_name,
            enum_name(q, "state"),
            ",".join(o.service_environment for o in q.service_environment_order),
            q.scheduling_policy_arn,
        )
        for q in c.describe_job_queues()
    ]
    print(render(("QUEUE", "STATE", "ENVIRONMENT", "POLICY"), rows))


def queue_snapshot(c: Quartermaster, a: argparse.Namespace) -> None:
    snap = c.queue_snapshot(a.name, a.max)
    print(
        render(
            ("#", "JOB", "SHARE", "PRIO", "CREATED", "REASON"),
            [
                (
                    i + 1,
                    j.job_name,
                    j.quota_share_name,
                    j.scheduling_priority,
                    when(j.created_at),
                    j.status_reason,
                )
                for i, j in enumerate(snap.front_of_queue)
            ],
        )
    )
    print()
    rows = []
    for s in snap.quota_shares:
        for u in s.capacity_usage:
            rows.append(
                (
                    s.quota_share_name,
                    u.capacity_unit,
                    u.quantity,
                    u.max_capacity,
                    u.borrowed,
                    ",".join(s.head_job_ids),
                )
            )
    print(render(("SHARE", "UNIT", "IN USE", "LIMIT", "BORROWED", "HEAD"), rows))


def share_create(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(
        c.create_quota_share(
            a.queue, a.name, _capacity(a.capacity), a.strategy, a.borrow_limit, a.preemption
        )
    )


def share_update(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(
        c.update_quota_share(
            a.queue, a.name, _capacity(a.capacity), a.strategy, a.borrow_limit, a.preemption
        )
    )


def share_delete(c: Quartermaster, a: argparse.Namespace) -> None:
    c.delete_quota_share(a.queue, a.name)
    print(f"deleted {a.queue}/{a.name}")


def share_describe(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(c.describe_quota_share(a.queue, a.name))


def share_list(c: Quartermaster, a: argparse.Namespace) -> None:
    rows = [
        (
            s.quota_share_name,
            enum_name(s.resource_sharing_configuration, "strategy"),
            s.resource_sharing_configuration.borrow_limit,
            " ".join(f"{lim.capacity_unit}={lim.max_capacity}" for lim in s.capacity_limits),
            enum_name(s.preemption_configuration, "in_share_preemption"),
            enum_name(s, "state"),
        )
        for s in c.list_quota_shares(a.queue)
    ]
    print(render(("SHARE", "STRATEGY", "BORROW%", "LIMITS", "IN-SHARE", "STATE"), rows))


def job_submit(c: Quartermaster, a: argparse.Namespace) -> None:
    payload = training_job(
        image=a.image,
        command=a.argv,
        instance_type=a.instance_type,
        instance_count=a.count,
        keep_alive_seconds=a.keep_alive,
        max_runtime_seconds=a.max_runtime,
    )
    options: dict[str, Any] = {"priority": a.priority, "client_token": a.client_token or ""}
    if a.attempts:
        options["retry_attempts"] = a.attempts
    if a.timeout:
        options["timeout_seconds"] = a.timeout
    if a.dry_run:  # nothing is submitted: what the pass would do with it now
        _show(TrainingQueue(a.queue, c).submit(payload, a.name, a.share, dry_run=True, **options))
        return
    job = TrainingQueue(a.queue, c).submit(payload, a.name, a.share, **options)
    print(job.job_id)


def job_describe(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(c.describe_job(a.job_id))


def job_list(c: Quartermaster, a: argparse.Namespace) -> None:
    rows = [
        (
            j.job_name,
            j.job_id,
            j.quota_share_name,
            enum_name(j, "status"),
            j.scheduling_priority,
            when(j.created_at),
            j.status_reason,
        )
        for j in c.list_jobs(a.queue, a.status)
    ]
    print(render(("NAME", "ID", "SHARE", "STATUS", "PRIO", "CREATED", "REASON"), rows))


def job_update(c: Quartermaster, a: argparse.Namespace) -> None:
    TrainingQueuedJob(c, a.job_id, "").update(a.priority)
    print(f"{a.job_id}: priority {a.priority}")


def job_terminate(c: Quartermaster, a: argparse.Namespace) -> None:
    TrainingQueuedJob(c, a.job_id, "").terminate(a.reason)
    print(f"{a.job_id}: terminated")


def job_watch(c: Quartermaster, a: argparse.Namespace) -> None:
    for change in c.watch(job_ids=a.job_ids, job_queue=a.queue or "", timeout=a.timeout):
        print(
            f"{when(change.at)}  {change.job_name:<24} {enum_name(change, 'status'):<10} "
            f"{change.status_reason}",
            flush=True,
        )


def job_wait(c: Quartermaster, a: argparse.Namespace) -> None:
    detail = TrainingQueuedJob(c, a.job_id, "").wait(a.timeout)
    print(enum_name(detail, "status"))


def pools_list(c: Quartermaster, a: argparse.Namespace) -> None:
    rows = [
        (
            p.training_job_name,
            p.job_id,
            enum_name(p, "status"),
            p.instance_type,
            p.instance_count,
            ",".join(p.host_ids),
            when(p.expires_at),
            p.resource_retained_billable_time_in_seconds,
            p.reused_by_job,
        )
        for p in c.list_warm_pools(a.status)
    ]
    headers = ("JOB", "ID", "STATUS", "TYPE", "N", "HOSTS", "EXPIRES", "BILLABLE S", "REUSED BY")
    print(render(headers, rows))


def pools_update(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(c.update_warm_pool(a.job_id, a.keep_alive))


def nodes_list(c: Quartermaster, a: argparse.Namespace) -> None:
    rows = [
        (
            n.host_id,
            n.instance_type,
            n.gpu_count,
            n.service_environment or "*",
            enum_name(n, "state"),
            n.job_id or "-",
            when(n.last_heartbeat_at),
        )
        for n in c.list_nodes()
    ]
    print(render(("HOST", "TYPE", "GPUS", "ENV", "STATE", "JOB", "HEARTBEAT"), rows))


def nodes_drain(c: Quartermaster, a: argparse.Namespace) -> None:
    _show(c.drain_node(a.host_id))


# ---- parser ----------------------------------------------------------------


def _share_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("queue")
    p.add_argument("name")
    p.add_argument("--capacity", nargs="+", required=True, metavar="UNIT=N")
    p.add_argument(
        "--strategy", default="LEND_AND_BORROW", choices=("RESERVE", "LEND", "LEND_AND_BORROW")
    )
    p.add_argument("--borrow-limit", type=int, default=None)
    p.add_argument("--preemption", action="store_true", help="enable in-share preemption")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="qm", description="Quartermaster: GPU training-job queues")
    top.add_argument("--address", default="127.0.0.1:50051", help="admission gRPC address")
    top.add_argument(
        "--credentials",
        default=None,
        metavar="DIR",
        help="directory with ca.pem and admin.token (default: $QM_CREDENTIALS_DIR, "
        "else ./.qm-data/credentials as written by qm up)",
    )
    top.add_argument("--insecure", action="store_true", help="plaintext, no token")
    groups = top.add_subparsers(dest="group", required=True)

    plugins.register_all(groups)
    audit.register(groups)
    usage.register(groups)
    top_command.register(groups)

    def group(name: str, help_: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
        return groups.add_parser(name, help=help_).add_subparsers(dest="command", required=True)

    def command(sub: Any, name: str, handler: Handler) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name)
        p.set_defaults(handler=handler)
        return p

    env = group("env", "service environments")
    p = command(env, "create", env_create)
    p.add_argument("name")
    p.add_argument("--capacity", nargs="+", required=True, metavar="UNIT=N")
    command(env, "list", env_list)

    policy = group("policy", "scheduling policies")
    command(policy, "create", policy_create).add_argument("name")

    queue = group("queue", "job queues")
    p = command(queue, "create", queue_create)
    p.add_argument("name")
    p.add_argument("--env", required=True)
    p.add_argument("--policy", required=True)
    command(queue, "list", queue_list)
    p = command(queue, "snapshot", queue_snapshot)
    p.add_argument("name")
    p.add_argument("--max", type=int, default=20)

    share = group("share", "quota shares")
    _share_flags(command(share, "create", share_create))
    _share_flags(command(share, "update", share_update))
    for name, handler in (("delete", share_delete), ("describe", share_describe)):
        p = command(share, name, handler)
        p.add_argument("queue")
        p.add_argument("name")
    command(share, "list", share_list).add_argument("queue")

    job = group("job", "service jobs")
    p = command(job, "submit", job_submit)
    p.add_argument("queue")
    p.add_argument("--share", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--priority", type=int, default=0)
    p.add_argument("--image", default="")
    p.add_argument("--instance-type", default="ml.g5.xlarge")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--keep-alive", type=int, default=0)
    p.add_argument("--max-runtime", type=int, default=None)
    p.add_argument("--timeout", type=int, default=None)
    p.add_argument("--attempts", type=int, default=None)
    p.add_argument("--client-token", default=None)
    p.add_argument("--dry-run", action="store_true", help="submit nothing; show what would happen")
    p.set_defaults(argv=[])  # after `--`: the entrypoint and its arguments
    command(job, "describe", job_describe).add_argument("job_id")
    p = command(job, "list", job_list)
    p.add_argument("queue")
    p.add_argument("--status", default=None)
    p = command(job, "update", job_update)
    p.add_argument("job_id")
    p.add_argument("--priority", type=int, required=True)
    p = command(job, "terminate", job_terminate)
    p.add_argument("job_id")
    p.add_argument("--reason", default="Terminated by the user")
    p = command(job, "watch", job_watch)
    p.add_argument("job_ids", nargs="*")
    p.add_argument("--queue", default=None)
    p.add_argument("--timeout", type=float, default=None)
    p = command(job, "wait", job_wait)
    p.add_argument("job_id")
    p.add_argument("--timeout", type=float, default=600)

    pools = group("pools", "managed warm pools")
    command(pools, "list", pools_list).add_argument("--status", default=None)
    p = command(pools, "update", pools_update)
    p.add_argument("job_id")
    p.add_argument("--keep-alive", type=int, required=True)

    nodes = group("nodes", "GPU hosts")
    command(nodes, "list", nodes_list)
    command(nodes, "drain", nodes_drain).add_argument("host_id")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # argparse's sub-commands do not take `--`: the job's command is split off first.
    command = words[words.index("--") + 1 :] if "--" in words else []
    words = words[: words.index("--")] if "--" in words else words
    args = parser().parse_args(words)
    if command:
        args.argv = command
    if hasattr(args, "run"):  # a plugin's command (e.g. `qm up`): it needs no client
        return int(args.run(args))
    secure = {"credentials_dir": args.credentials, "insecure": args.insecure or None}
    with Quartermaster(args.address, **secure) as client:
        try:
            args.handler(client, args)
        except QuartermasterError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
