"""Who may call what: one permission per RPC, the permissions of each role, and share scope.

The interceptor checks the role-level permission of every call before the
servicer runs; servicers then check the scope (this job's or this request's
quota share) with `require_share`, because only they know which share a request
touches. A refusal is PERMISSION_DENIED naming the permission; nothing is written.
"""

from __future__ import annotations

import contextvars
from enum import StrEnum

from qm_admission.errors import Code, RequestRejected
from quartermaster.auth import Principal, Role


class Permission(StrEnum):
    CONFIG_WRITE = "config:write"  # environments, policies, queues, quota shares
    CONFIG_READ = "config:read"
    NODES_WRITE = "nodes:write"
    NODES_READ = "nodes:read"
    JOBS_SUBMIT = "jobs:submit"
    JOBS_UPDATE = "jobs:update"
    JOBS_TERMINATE = "jobs:terminate"
    JOBS_READ = "jobs:read"
    JOBS_LOGS = "jobs:logs:read"  # an attempt's output (members: their own shares' jobs)
    POOLS_UPDATE = "pools:update"
    POOLS_READ = "pools:read"
    QUEUE_SNAPSHOT = "queues:snapshot"
    SHARES_READ = "shares:read"  # a share's definition (members: their own shares)
    # Tags: of jobs by share scope (members: their own shares' jobs); of configuration
    # resources, admins write and configuration readers read (checked by the servicer).
    TAGS_WRITE = "tags:write"
    TAGS_READ = "tags:read"


P = Permission
NEEDS: dict[str, Permission] = {
    "/qm.v1.QuotaManagement/CreateServiceEnvironment": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/UpdateServiceEnvironment": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/DescribeServiceEnvironments": P.CONFIG_READ,
    "/qm.v1.QuotaManagement/CreateSchedulingPolicy": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/CreateJobQueue": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/UpdateJobQueue": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/DescribeJobQueues": P.CONFIG_READ,
    "/qm.v1.QuotaManagement/GetJobQueueSnapshot": P.QUEUE_SNAPSHOT,
    "/qm.v1.QuotaManagement/CreateQuotaShare": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/UpdateQuotaShare": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/DeleteQuotaShare": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/DescribeQuotaShare": P.SHARES_READ,
    "/qm.v1.QuotaManagement/ListQuotaShares": P.CONFIG_READ,
    "/qm.v1.QuotaManagement/DeleteServiceEnvironment": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/UpdateSchedulingPolicy": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/DescribeSchedulingPolicies": P.CONFIG_READ,
    "/qm.v1.QuotaManagement/ListSchedulingPolicies": P.CONFIG_READ,
    "/qm.v1.QuotaManagement/DeleteSchedulingPolicy": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/DeleteJobQueue": P.CONFIG_WRITE,
    "/qm.v1.QuotaManagement/TagResource": P.TAGS_WRITE,
    "/qm.v1.QuotaManagement/UntagResource": P.TAGS_WRITE,
    "/qm.v1.QuotaManagement/ListTagsForResource": P.TAGS_READ,
    "/qm.v1.ServiceJobs/SubmitServiceJob": P.JOBS_SUBMIT,
    "/qm.v1.ServiceJobs/SubmitServiceJobs": P.JOBS_SUBMIT,
    "/qm.v1.ServiceJobs/UpdateServiceJob": P.JOBS_UPDATE,
    "/qm.v1.ServiceJobs/TerminateServiceJob": P.JOBS_TERMINATE,
    "/qm.v1.ServiceJobs/DescribeServiceJob": P.JOBS_READ,
    "/qm.v1.ServiceJobs/ListServiceJobs": P.JOBS_READ,
    "/qm.v1.ServiceJobs/WatchServiceJobs": P.JOBS_READ,
    "/qm.v1.ServiceJobs/ExplainServiceJob": P.JOBS_READ,
    "/qm.v1.ServiceJobs/GetServiceJobLogs": P.JOBS_LOGS,
    "/qm.v1.WarmPools/ListWarmPools": P.POOLS_READ,
    "/qm.v1.WarmPools/UpdateWarmPool": P.POOLS_UPDATE,
    "/qm.v1.Nodes/ListNodes": P.NODES_READ,
    "/qm.v1.Nodes/DrainNode": P.NODES_WRITE,
    "/qm.v1.Nodes/UndrainNode": P.NODES_WRITE,
}

READS = frozenset(p for p in Permission if p.endswith((":read", ":snapshot")))
# Members hold these only for the jobs, pools and queues of their own shares.
MEMBER_SCOPED = frozenset(
    {
        P.JOBS_SUBMIT,
        P.JOBS_UPDATE,
        P.JOBS_TERMINATE,
        P.JOBS_READ,
        P.JOBS_LOGS,
        P.POOLS_UPDATE,
        P.QUEUE_SNAPSHOT,
        P.SHARES_READ,
        P.TAGS_WRITE,
        P.TAGS_READ,
    }
)
GRANTS: dict[Role, frozenset[Permission]] = {
    Role.ADMIN: frozenset(Permission),
    Role.AUDITOR: READS,
    Role.MEMBER: MEMBER_SCOPED,
}
# Health and reflection answer anyone: probes and tools must see whether it serves.
OPEN_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")

# The caller of the RPC being served (set by the interceptor for the call's task).
current: contextvars.ContextVar[Principal] = contextvars.ContextVar("qm_principal")
ANONYMOUS_ADMIN = Principal(subject="anonymous", roles=frozenset({Role.ADMIN}))


def denied(permission: Permission, why: str) -> RequestRejected:
    return RequestRejected(Code.PERMISSION_DENIED, "", f"permission {permission} {why}")


def granted(principal: Principal, permission: Permission) -> bool:
    return any(permission in GRANTS[role] for role in principal.roles)


def check_method(principal: Principal, method: str) -> None:
    """Role level: may this principal call `method` at all?"""
    permission = NEEDS.get(method)
    if permission is None:
        raise denied(P.CONFIG_WRITE, f"is needed for {method}, which no role is granted")
    if not granted(principal, permission):
        roles = ",".join(sorted(principal.roles)) or "none"
        raise denied(permission, f"is not granted to {principal.subject} (roles: {roles})")


def caller() -> Principal:
    return current.get(ANONYMOUS_ADMIN)


def require_granted(permission: Permission) -> None:
    """Role level, inside a servicer: the caller holds `permission` (any scope)."""
    principal = caller()
    if not granted(principal, permission):
        roles = ",".join(sorted(principal.roles)) or "none"
        raise denied(permission, f"is not granted to {principal.subject} (roles: {roles})")


def require_share(permission: Permission, job_queue: str, quota_share: str) -> None:
    """Scope: the caller reads everything, or is a member of `job_queue/quota_share`."""
    principal = caller()
    if principal.is_admin:
        return
    if permission in READS and principal.may_read_all():
        return
    if not principal.member_of(job_queue, quota_share):
        raise denied(
            permission,
            f"on {job_queue}/{quota_share} is not granted to {principal.subject} "
            "(not a member of that quota share)",
        )


def require_queue(permission: Permission, job_queue: str) -> None:
    """Scope: the caller reads everything, or is a member of some share of `job_queue`."""
    principal = caller()
    if principal.is_admin or (permission in READS and principal.may_read_all()):
        return
    if job_queue not in principal.member_queues():
        raise denied(
            permission,
            f"on queue {job_queue} is not granted to {principal.subject} "
            "(member of no quota share of it)",
        )


def visible_shares(job_queue: str) -> frozenset[str] | None:
    """The shares of `job_queue` whose jobs the caller may list (None: all of them)."""
    principal = caller()
    if principal.may_read_all():
        return None
    return frozenset(s.quota_share for s in principal.shares if s.job_queue == job_queue)
