"""`qm`: a thin command line over `quartermaster.client`, one subcommand per RPC.

Every flag has help and shows its default; every read takes `--output table|json`;
enum values take any case. Bad input is one line on stderr and exit 2; a refused or
failed call is one line (`qm: error: CODE: ...`) and exit 1; never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.cli import audit, aws_env, deploy, jobs, keys, plugins, resources, usage
from quartermaster.cli import top as top_command
from quartermaster.cli.options import (
    CALL_ERROR,
    USAGE_ERROR,
    QmParser,
    UsageError,
    add_output,
    capacity,
    capacity_of,
    choice,
    emit,
    enum_values,
    positive,
    show,
    show_one,
)
from quartermaster.cli.tables import enum_name, render, when
from quartermaster.client import Quartermaster, QuartermasterError
from quartermaster.client.connection import DEFAULT_ADDRESS

Handler = Callable[[Quartermaster, argparse.Namespace], int | None]
STRATEGIES = ("RESERVE", "LEND", "LEND_AND_BORROW")
JOB_STATUSES = enum_values(pb.JobStatus)
POOL_STATUSES = enum_values(pb.WarmPoolStatus)
STATES = ("ENABLED", "DISABLED")


# ---- handlers --------------------------------------------------------------


def env_create(c: Quartermaster, a: argparse.Namespace) -> None:
    show(c.create_service_environment(a.name, capacity_of(a.capacity)))


def env_update(c: Quartermaster, a: argparse.Namespace) -> None:
    request = pb.UpdateServiceEnvironmentRequest(service_environment=a.name)
    if a.state:
        request.state = pb.ServiceEnvironmentState.Value(f"SERVICE_ENVIRONMENT_STATE_{a.state}")
    for unit, count in a.capacity or ():
        request.capacity_limits.add(capacity_unit=unit, max_capacity=count)
    if not a.state and not a.capacity:
        raise UsageError("nothing to change: give --capacity and/or --state")
    show(c.call(c.quota.UpdateServiceEnvironment, request))


def env_list(c: Quartermaster, a: argparse.Namespace) -> None:
    def table(envs: Sequence[Any]) -> str:
        rows = []
        for e in envs:
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
        return render(("ENVIRONMENT", "UNIT", "MAX", "USABLE", "IN USE"), rows)

    emit(a, c.describe_service_environments(), table)


def policy_create(c: Quartermaster, a: argparse.Namespace) -> None:
    show(c.create_scheduling_policy(a.name))


def queue_create(c: Quartermaster, a: argparse.Namespace) -> None:
    show(c.create_job_queue(a.name, a.env, a.policy))


def queue_update(c: Quartermaster, a: argparse.Namespace) -> None:
    request = pb.UpdateJobQueueRequest(job_queue=a.name, scheduling_policy_arn=a.policy or "")
    if a.state:
        request.state = pb.QueueState.Value(f"QUEUE_STATE_{a.state}")
    if a.priority is not None:
        request.priority = a.priority
    if not (a.state or a.policy or a.priority is not None):
        raise UsageError("nothing to change: give --state, --policy and/or --priority")
    show(c.call(c.quota.UpdateJobQueue, request))


def queue_list(c: Quartermaster, a: argparse.Namespace) -> None:
    emit(
        a,
        c.describe_job_queues(),
        lambda queues: render(
            ("QUEUE", "STATE", "ENVIRONMENT", "POLICY"),
            [
                (
                    q.job_queue_name,
                    enum_name(q, "state"),
                    ",".join(o.service_environment for o in q.service_environment_order),
                    q.scheduling_policy_arn,
                )
                for q in queues
            ],
        ),
    )


def queue_snapshot(c: Quartermaster, a: argparse.Namespace) -> None:
    snap = c.queue_snapshot(a.name, a.max)
    if a.output == "json":
        show(snap)
        return
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
    show(
        c.create_quota_share(
            a.queue, a.name, capacity_of(a.capacity), a.strategy, a.borrow_limit, a.preemption
        )
    )


def share_update(c: Quartermaster, a: argparse.Namespace) -> None:
    show(
        c.update_quota_share(
            a.queue, a.name, capacity_of(a.capacity), a.strategy, a.borrow_limit, a.preemption
        )
    )


def share_delete(c: Quartermaster, a: argparse.Namespace) -> None:
    c.delete_quota_share(a.queue, a.name)
    print(f"deleted {a.queue}/{a.name}")


def share_describe(c: Quartermaster, a: argparse.Namespace) -> None:
    show_one(a, c.describe_quota_share(a.queue, a.name))


def share_list(c: Quartermaster, a: argparse.Namespace) -> None:
    emit(
        a,
        c.list_quota_shares(a.queue),
        lambda shares: render(
            ("SHARE", "STRATEGY", "BORROW%", "LIMITS", "IN-SHARE", "STATE"),
            [
                (
                    s.quota_share_name,
                    enum_name(s.resource_sharing_configuration, "strategy"),
                    s.resource_sharing_configuration.borrow_limit,
                    " ".join(
                        f"{lim.capacity_unit}={lim.max_capacity}" for lim in s.capacity_limits
                    ),
                    enum_name(s.preemption_configuration, "in_share_preemption"),
                    enum_name(s, "state"),
                )
                for s in shares
            ],
        ),
    )


def job_describe(c: Quartermaster, a: argparse.Namespace) -> None:
    show_one(a, c.describe_job(a.job_id))


def job_list(c: Quartermaster, a: argparse.Namespace) -> None:
    emit(
        a,
        c.list_jobs(a.queue, a.status),
        lambda listed: render(
            ("NAME", "ID", "SHARE", "STATUS", "PRIO", "CREATED", "REASON"),
            [
                (
                    j.job_name,
                    j.job_id,
                    j.quota_share_name,
                    enum_name(j, "status"),
                    j.scheduling_priority,
                    when(j.created_at),
                    j.status_reason,
                )
                for j in listed
            ],
        ),
    )


def job_update(c: Quartermaster, a: argparse.Namespace) -> None:
    request = pb.UpdateServiceJobRequest(job_id=a.job_id, scheduling_priority=a.priority)
    c.call(c.jobs.UpdateServiceJob, request)
    print(f"{a.job_id}: priority {a.priority}")


def job_terminate(c: Quartermaster, a: argparse.Namespace) -> None:
    request = pb.TerminateServiceJobRequest(job_id=a.job_id, reason=a.reason)
    c.call(c.jobs.TerminateServiceJob, request)
    print(f"{a.job_id}: terminated")


def job_watch(c: Quartermaster, a: argparse.Namespace) -> None:
    changes = c.watch(
        job_ids=a.job_ids, job_queue=a.queue or "", statuses=a.status or (), timeout=a.timeout
    )
    for change in changes:
        print(
            f"{when(change.at)}  {change.job_name:<24} {enum_name(change, 'status'):<10} "
            f"{change.status_reason}",
            flush=True,
        )


def pools_list(c: Quartermaster, a: argparse.Namespace) -> None:
    headers = ("JOB", "ID", "STATUS", "TYPE", "N", "HOSTS", "EXPIRES", "BILLABLE S", "REUSED BY")
    emit(
        a,
        c.list_warm_pools(a.status),
        lambda pools: render(
            headers,
            [
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
                for p in pools
            ],
        ),
    )


def pools_update(c: Quartermaster, a: argparse.Namespace) -> None:
    show(c.update_warm_pool(a.job_id, a.keep_alive))


def nodes_list(c: Quartermaster, a: argparse.Namespace) -> None:
    emit(
        a,
        c.list_nodes(),
        lambda nodes: render(
            ("HOST", "TYPE", "GPUS", "ENV", "STATE", "JOB", "HEARTBEAT"),
            [
                (
                    n.host_id,
                    n.instance_type,
                    n.gpu_count,
                    n.service_environment or "*",
                    enum_name(n, "state"),
                    n.job_id or "-",
                    when(n.last_heartbeat_at),
                )
                for n in nodes
            ],
        ),
    )


def nodes_drain(c: Quartermaster, a: argparse.Namespace) -> None:
    show(c.drain_node(a.host_id))


def nodes_undrain(c: Quartermaster, a: argparse.Namespace) -> None:
    show(c.undrain_node(a.host_id))


# ---- parser ----------------------------------------------------------------

SUBMIT_USAGE = (
    "qm job submit QUEUE --share SHARE --name NAME [options] -- COMMAND [ARG ...]\n"
    "  e.g. qm job submit q --share A --name hello -- python train.py --epochs 3"
)


def _share_flags(p: argparse.ArgumentParser, *, create: bool) -> None:
    p.add_argument("queue", help="job queue (name or ARN)")
    p.add_argument("name", help="quota share name")
    p.add_argument(
        "--capacity",
        nargs="+",
        required=True,
        type=capacity,
        metavar="UNIT=N",
        help="capacity limits, e.g. ml.g5.xlarge=4",
    )
    p.add_argument(
        "--strategy",
        default="LEND_AND_BORROW",
        help="what the share does with idle capacity",
        **choice(STRATEGIES),
    )
    p.add_argument(
        "--borrow-limit",
        type=int,
        default=None,
        help="percent of its limits a LEND_AND_BORROW share may borrow (unset: no limit)",
    )
    p.add_argument(
        "--preemption",
        action="store_true",
        default=False if create else None,
        help="enable in-share preemption" + ("" if create else " (unset: unchanged)"),
    )


def _submit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--priority", type=int, default=0, help="scheduling priority (higher first)")
    p.add_argument("--image", default="", help="container image (docker runtime)")
    p.add_argument("--instance-type", default="ml.g5.xlarge", help="instance type of each host")
    p.add_argument("--count", type=positive, default=1, help="instances (hosts) per attempt")
    p.add_argument(
        "--keep-alive", type=int, default=0, help="warm pool keep-alive seconds after success"
    )
    p.add_argument("--max-runtime", type=int, default=None, help="MaxRuntimeInSeconds")
    p.add_argument("--timeout", type=int, default=None, help="attempt duration limit, seconds")
    p.add_argument("--attempts", type=int, default=None, help="retry strategy attempts (1-10)")
    p.add_argument("--client-token", default=None, help="idempotency token")
    # The training-job contract: what the host stages before the entrypoint starts, and
    # where it puts the model once the job ends.
    p.add_argument(
        "--channel",
        dest="channels",
        action="append",
        type=key_value,
        metavar="NAME=URI",
        help="an input channel staged into /opt/ml/input/data/NAME (s3://, file:// or a "
        "host path; repeatable)",
    )
    p.add_argument("--output-path", default=None, help="S3OutputPath: model.tar.gz goes under it")
    p.add_argument(
        "--hyperparameter",
        dest="hyperparameters",
        action="append",
        type=key_value,
        metavar="KEY=VALUE",
        help="a hyperparameter (repeatable)",
    )
    p.add_argument(
        "--env",
        dest="env_vars",
        action="append",
        type=key_value,
        metavar="NAME=VALUE",
        help="an environment variable of the job (repeatable)",
    )
    p.add_argument("--role", default=None, help="RoleArn: selects the job's store credentials")
    p.add_argument(
        "--checkpoint-s3", default=None, help="CheckpointConfig.S3Uri (restored at each start)"
    )
    p.add_argument(
        "--checkpoint-local",
        default=None,
        help="CheckpointConfig.LocalPath (default: /opt/ml/checkpoints)",
    )


def key_value(text: str) -> tuple[str, str]:
    """`NAME=VALUE` (the value may hold `=`)."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def parser() -> argparse.ArgumentParser:
    top = QmParser(prog="qm", description="Quartermaster: GPU training-job queues")
    top.add_argument(
        "--address",
        default=os.environ.get("QM_ADDRESS") or DEFAULT_ADDRESS,
        help=f"admission gRPC address ($QM_ADDRESS, else {DEFAULT_ADDRESS})",
    )
    top.add_argument(
        "--credentials",
        default=None,
        metavar="DIR",
        help="directory with ca.pem and admin.token (default: $QM_CREDENTIALS_DIR, "
        "else ./.qm-data/credentials as written by qm up)",
    )
    top.add_argument("--insecure", action="store_true", help="plaintext, no token")
    groups = top.add_subparsers(
        dest="group", required=True, metavar="COMMAND", parser_class=QmParser
    )

    plugins.register_all(groups)
    audit.register(groups)
    usage.register(groups)
    top_command.register(groups)
    aws_env.register(groups)
    keys.register(groups)
    deploy.register(groups)

    def group(name: str, help_: str) -> Any:
        return groups.add_parser(name, help=help_, description=help_).add_subparsers(
            dest="command", required=True, metavar="COMMAND", parser_class=QmParser
        )

    def command(
        sub: Any, name: str, handler: Handler, help_: str, *, read: bool = False, **kw: Any
    ) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, help=help_, description=help_, **kw)
        p.set_defaults(handler=handler)
        if read:
            add_output(p)
        return p

    env = group("env", "service environments")
    p = command(env, "create", env_create, "create a service environment")
    p.add_argument("name", help="environment name")
    p.add_argument(
        "--capacity", nargs="+", required=True, type=capacity, metavar="UNIT=N",
        help="capacity limits, e.g. ml.g5.xlarge=4",
    )  # fmt: skip
    p = command(env, "update", env_update, "change an environment's limits or state")
    p.add_argument("name", help="environment name or ARN")
    p.add_argument(
        "--capacity", nargs="+", type=capacity, metavar="UNIT=N",
        help="new capacity limits, replacing all (unset: unchanged)",
    )  # fmt: skip
    p.add_argument("--state", default=None, help="unset: unchanged", **choice(STATES))
    command(env, "list", env_list, "list environments with capacity and use", read=True)

    policy = group("policy", "scheduling policies")
    p = command(policy, "create", policy_create, "create a FIFO scheduling policy")
    p.add_argument("name", help="policy name")

    queue = group("queue", "job queues")
    p = command(queue, "create", queue_create, "create a job queue")
    p.add_argument("name", help="queue name")
    p.add_argument("--env", required=True, help="service environment (name or ARN)")
    p.add_argument("--policy", required=True, help="scheduling policy (name or ARN)")
    p = command(queue, "update", queue_update, "change a queue's state, policy or priority")
    p.add_argument("name", help="queue name or ARN")
    p.add_argument("--state", default=None, help="unset: unchanged", **choice(STATES))
    p.add_argument("--policy", default=None, help="scheduling policy (unset: unchanged)")
    p.add_argument("--priority", type=int, default=None, help="0-1000 (unset: unchanged)")
    command(queue, "list", queue_list, "list job queues", read=True)
    p = command(queue, "snapshot", queue_snapshot, "front of the queue and share use", read=True)
    p.add_argument("name", help="queue name or ARN")
    p.add_argument("--max", type=positive, default=20, help="jobs shown at the front")

    share = group("share", "quota shares")
    _share_flags(command(share, "create", share_create, "create a quota share"), create=True)
    _share_flags(command(share, "update", share_update, "change a quota share"), create=False)
    p = command(share, "delete", share_delete, "delete a quota share")
    p.add_argument("queue", help="job queue (name or ARN)")
    p.add_argument("name", help="quota share name")
    p = command(share, "describe", share_describe, "show a quota share")
    p.add_argument("queue", help="job queue (name or ARN)")
    p.add_argument("name", help="quota share name")
    add_output(p, default="json")
    p = command(share, "list", share_list, "list a queue's quota shares", read=True)
    p.add_argument("queue", help="job queue (name or ARN)")

    job = group("job", "service jobs")
    p = command(job, "submit", jobs.job_submit, "submit a job", usage=SUBMIT_USAGE)
    p.add_argument("queue", help="job queue (name or ARN)")
    p.add_argument("--share", required=True, help="quota share to submit into")
    p.add_argument("--name", required=True, help="job name")
    _submit_flags(p)
    p.add_argument("--dry-run", action="store_true", help="submit nothing; show what would happen")
    p.set_defaults(argv=[])  # after `--`: the entrypoint and its arguments
    p = command(
        job,
        "submit-many",
        jobs.job_submit_many,
        "submit the jobs of a JSONL or YAML file (SubmitServiceJobs, in chunks)",
        read=True,
        epilog="Each submission holds the flags of `qm job submit` as fields: "
        + ", ".join(sorted(jobs.ENTRY_FIELDS))
        + " (command: a list, e.g. [python, train.py]).",
    )
    p.add_argument("file", help="a .jsonl file (one object a line) or a YAML list")
    p.add_argument("--queue", default=None, help="queue of entries that name none")
    p.add_argument("--share", default=None, help="share of entries that name none")
    p.add_argument(
        "--chunk",
        type=positive,
        default=500,
        help=f"submissions per call (at most {jobs.CHUNK_MAX})",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar left on the terminal")
    p = command(job, "describe", job_describe, "show a job in full")
    p.add_argument("job_id", help="job id or ARN")
    add_output(p, default="json")
    p = command(job, "list", job_list, "list a queue's jobs", read=True)
    p.add_argument("queue", help="job queue (name or ARN)")
    p.add_argument("--status", default=None, help="unset: every status", **choice(JOB_STATUSES))
    p = command(job, "update", job_update, "change a job's scheduling priority")
    p.add_argument("job_id", help="job id or ARN")
    p.add_argument("--priority", type=int, required=True, help="new scheduling priority")
    p = command(job, "terminate", job_terminate, "terminate a job (it becomes FAILED)")
    p.add_argument("job_id", help="job id or ARN")
    p.add_argument("--reason", default="Terminated by the user", help="status reason recorded")
    p = command(job, "watch", job_watch, "stream status changes")
    p.add_argument("job_ids", nargs="*", help="jobs to watch (none: every job)")
    p.add_argument("--queue", default=None, help="only this queue's jobs")
    p.add_argument(
        "--status",
        action="append",
        default=None,
        help="only changes to this status (repeat for several; unset: every change)",
        **choice(JOB_STATUSES),
    )
    p.add_argument("--timeout", type=float, default=None, help="stop after seconds (unset: never)")
    p = command(
        job,
        "wait",
        jobs.job_wait,
        "wait for a job to end, showing each status change; exit 1 if it failed",
    )
    p.add_argument("job_id", help="job id or ARN")
    p.add_argument("--timeout", type=float, default=600, help="give up after seconds")
    p = command(job, "logs", jobs.job_logs_command, "print an attempt's stdout and stderr")
    p.add_argument("job_id", help="job id or ARN")
    p.add_argument("--follow", "-f", action="store_true", help="stream until the attempt ends")
    p.add_argument("--attempt", type=int, default=0, help="attempt number (0: the latest)")
    p.add_argument("--host", default=None, help="host of a multi-node attempt (unset: first)")

    pools = group("pools", "managed warm pools")
    p = command(pools, "list", pools_list, "list warm pools", read=True)
    p.add_argument("--status", default=None, help="unset: every status", **choice(POOL_STATUSES))
    p = command(pools, "update", pools_update, "change a warm pool's keep-alive")
    p.add_argument("job_id", help="the job the pool is named after")
    p.add_argument("--keep-alive", type=int, required=True, help="seconds; 0 terminates the pool")

    resources.add({"env": env, "policy": policy, "queue": queue, "share": share}, group, command)

    nodes = group("nodes", "GPU hosts")
    command(nodes, "list", nodes_list, "list hosts", read=True)
    p = command(nodes, "drain", nodes_drain, "take no new work on a host (survives restarts)")
    p.add_argument("host_id", help="host id")
    p = command(nodes, "undrain", nodes_undrain, "let a drained host take new work again")
    p.add_argument("host_id", help="host id")
    return top


def split_command(words: list[str]) -> tuple[list[str], list[str]]:
    """argparse's sub-commands do not take `--`: the job's command is split off first."""
    if "--" not in words:
        return words, []
    at = words.index("--")
    return words[:at], words[at + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    words, command = split_command(list(sys.argv[1:] if argv is None else argv))
    try:
        args = parser().parse_args(words)
        if command:
            args.argv = command
        if hasattr(args, "run"):  # a plugin's command (e.g. `qm up`): it needs no client
            return int(args.run(args))
        return _call(args)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else USAGE_ERROR
    except KeyboardInterrupt:
        print("qm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `qm job logs J | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _call(args: argparse.Namespace) -> int:
    secure = {"credentials_dir": args.credentials, "insecure": args.insecure or None}
    try:
        with Quartermaster(args.address, **secure) as client:
            return int(args.handler(client, args) or 0)
    except UsageError as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    except QuartermasterError as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return CALL_ERROR
    except BrokenPipeError:
        raise
    except (TimeoutError, OSError) as err:  # a wait ran out; credentials not readable
        print(f"qm: error: {err}", file=sys.stderr)
        return CALL_ERROR


if __name__ == "__main__":
    sys.exit(main())
