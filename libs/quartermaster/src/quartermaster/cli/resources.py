"""`qm` commands for AWS Batch's resource calls: deletes, scheduling policies, tags.

`add(groups)` puts them under the groups `qm` already has (env, policy, queue) and
adds `qm tags`; each command is one RPC, its answer printed as the others' are.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.cli.options import emit, show
from quartermaster.cli.tables import render
from quartermaster.client import Quartermaster

Command = Callable[..., argparse.ArgumentParser]


def env_delete(c: Quartermaster, a: argparse.Namespace) -> None:
    c.call(
        c.quota.DeleteServiceEnvironment,
        pb.DeleteServiceEnvironmentRequest(service_environment=a.name),
    )
    print(f"deleted {a.name}")


def queue_delete(c: Quartermaster, a: argparse.Namespace) -> None:
    c.call(c.quota.DeleteJobQueue, pb.DeleteJobQueueRequest(job_queue=a.name))
    print(f"deleted {a.name}")


def share_state(c: Quartermaster, a: argparse.Namespace) -> None:
    state = pb.QUOTA_SHARE_STATE_ENABLED if a.enable else pb.QUOTA_SHARE_STATE_DISABLED
    request = pb.UpdateQuotaShareRequest(job_queue=a.queue, quota_share_name=a.name, state=state)
    c.call(c.quota.UpdateQuotaShare, request)
    print(f"{a.queue}/{a.name}: {'ENABLED' if a.enable else 'DISABLED'}")


def policy_delete(c: Quartermaster, a: argparse.Namespace) -> None:
    c.call(c.quota.DeleteSchedulingPolicy, pb.DeleteSchedulingPolicyRequest(arn=a.name))
    print(f"deleted {a.name}")


def policy_update(c: Quartermaster, a: argparse.Namespace) -> None:
    fifo = pb.QuotaSharePolicy(
        idle_resource_assignment_strategy=pb.IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIFO
    )
    request = pb.UpdateSchedulingPolicyRequest(arn=a.name, quota_share_policy=fifo)
    c.call(c.quota.UpdateSchedulingPolicy, request)
    print(f"updated {a.name}")


def policy_list(c: Quartermaster, a: argparse.Namespace) -> None:
    arns: list[str] = []
    token = ""
    while True:
        reply = c.call(
            c.quota.ListSchedulingPolicies, pb.ListSchedulingPoliciesRequest(next_token=token)
        )
        arns.extend(p.arn for p in reply.scheduling_policies)
        token = reply.next_token
        if not token:
            break
    policies: list[Any] = []
    for at in range(0, len(arns), 100):
        request = pb.DescribeSchedulingPoliciesRequest(arns=arns[at : at + 100])
        policies.extend(c.call(c.quota.DescribeSchedulingPolicies, request).scheduling_policies)
    emit(
        a,
        policies,
        lambda items: render(
            ("POLICY", "ARN", "TAGS"),
            [(p.name, p.arn, _tags(p.tags)) for p in items],
        ),
    )


def tags_add(c: Quartermaster, a: argparse.Namespace) -> None:
    c.call(c.quota.TagResource, pb.TagResourceRequest(resource_arn=a.arn, tags=dict(a.tags)))
    print(f"tagged {a.arn}")


def tags_remove(c: Quartermaster, a: argparse.Namespace) -> None:
    request = pb.UntagResourceRequest(resource_arn=a.arn, tag_keys=a.keys)
    c.call(c.quota.UntagResource, request)
    print(f"untagged {a.arn}")


def tags_list(c: Quartermaster, a: argparse.Namespace) -> None:
    reply = c.call(c.quota.ListTagsForResource, pb.ListTagsForResourceRequest(resource_arn=a.arn))
    if a.output == "json":
        show(reply)
    else:
        print(render(("KEY", "VALUE"), sorted(reply.tags.items())))


def _tags(tags: Any) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(tags.items())) or "-"


def tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add(sub: dict[str, Any], group: Callable[[str, str], Any], command: Command) -> None:
    """Add the commands to `qm`'s env, policy, queue and share groups (`sub`), and tags."""
    p = command(sub["env"], "delete", env_delete, "delete a DISABLED environment no queue uses")
    p.add_argument("name", help="environment name or ARN")
    p = command(
        sub["queue"], "delete", queue_delete, "delete a DISABLED queue with no shares or jobs left"
    )
    p.add_argument("name", help="queue name or ARN")
    for name, enable, help_ in (
        ("disable", False, "disable a quota share (no new submissions; needed before delete)"),
        ("enable", True, "enable a quota share again"),
    ):
        p = command(sub["share"], name, share_state, help_)
        p.add_argument("queue", help="job queue (name or ARN)")
        p.add_argument("name", help="quota share name")
        p.set_defaults(enable=enable)
    policy = sub["policy"]
    p = command(policy, "delete", policy_delete, "delete a policy no queue uses")
    p.add_argument("name", help="policy name or ARN")
    p = command(policy, "update", policy_update, "set a policy's idle-resource strategy (FIFO)")
    p.add_argument("name", help="policy name or ARN")
    command(policy, "list", policy_list, "list scheduling policies", read=True)

    tags = group("tags", "tags of any resource, by its ARN")
    p = command(tags, "add", tags_add, "add tags (or change their values)")
    p.add_argument("arn", help="ARN of an environment, policy, queue, quota share or job")
    p.add_argument("tags", nargs="+", type=tag, metavar="KEY=VALUE", help="tags to set")
    p = command(tags, "remove", tags_remove, "remove tags by key")
    p.add_argument("arn", help="ARN of an environment, policy, queue, quota share or job")
    p.add_argument("keys", nargs="+", metavar="KEY", help="tag keys to remove")
    p = command(tags, "list", tags_list, "show a resource's tags", read=True)
    p.add_argument("arn", help="ARN of an environment, policy, queue, quota share or job")
