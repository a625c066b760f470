"""Which subject may carry which event: the fold's defence against forged writes.

Each subject family has one producer, and NATS permissions let only that producer
publish there (`quartermaster.embedded.nats_auth`). The readers check the same
rule from their side, so a forged event on the wrong subject is ignored even if a
server is misconfigured: a dispatch is obeyed only from `<p>.decisions.<queue>`,
a registration or attempt report of host X only from `<p>.reports.X`. The rule is
by tag (stable strings); a tag missing from the table is refused, so a new event
kind must be given its family here before anyone folds it.
"""

from __future__ import annotations

from enum import StrEnum

from quartermaster.events import Event, tag_of


class Family(StrEnum):
    REQUESTS = "requests"  # <p>.requests: admission
    DECISIONS = "decisions"  # <p>.decisions.<queue>: the scheduler leading the queue
    HOST_DECISIONS = "host_decisions"  # <p>.decisions._hosts: any scheduler
    TIMERS = "timers"  # <p>.timers: the warm-pool service
    REPORTS = "reports"  # <p>.reports.<host>: that host's node agent


HOSTS_TOKEN = "_hosts"

_REQUESTS = (
    "service_environment.created",
    "service_environment.updated",
    "scheduling_policy.created",
    "job_queue.created",
    "job_queue.updated",
    "quota_share.created",
    "quota_share.updated",
    "quota_share.deleted",
    "job.submitted",
    "job.priority_updated",
    "job.termination_requested",
    "warm_pool.keep_alive_updated",
    "host.drained",
    "host.undrained",
    "service_environment.deleted",
    "scheduling_policy.updated",
    "scheduling_policy.deleted",
    "job_queue.deleted",
    "resource.tagged",
    "resource.untagged",
)
_DECISIONS = (
    "job.dispatched",
    "job.preemption_requested",
    "job.timed_out",
    "job.status_reason_set",
    "job.retried",
    "job.finally_failed",
    "warm_pool.available",
    "warm_pool.in_use",
    "warm_pool.reused",
    "warm_pool.terminated",
)
_REPORTS = (
    "host.registered",
    "host.heartbeat",
    "job.starting",
    "job.running",
    "job.checkpointed",
    "job.succeeded",
    "job.failed",
    "job.stop_confirmed",
)

FAMILIES: dict[str, frozenset[Family]] = {
    **{tag: frozenset({Family.REQUESTS}) for tag in _REQUESTS},
    # A queue may be named `_hosts` (names allow a leading underscore), so its job
    # decisions may arrive on that subject too; host liveness arrives only there.
    **{tag: frozenset({Family.DECISIONS, Family.HOST_DECISIONS}) for tag in _DECISIONS},
    "host.lost": frozenset({Family.HOST_DECISIONS}),
    "clock.ticked": frozenset({Family.TIMERS}),
    **{tag: frozenset({Family.REPORTS}) for tag in _REPORTS},
}


def token(name: str) -> str:
    """A subject token for a name: names allow [A-Za-z0-9_-], which NATS accepts as is."""
    return name.replace(".", "_").replace("*", "_").replace(">", "_") or "_"


def family_of(subject: str, prefix: str) -> tuple[Family, str] | None:
    """`<p>.reports.X` -> (REPORTS, "X"); None for a subject no producer owns."""
    head = f"{prefix}."
    if not subject.startswith(head):
        return None
    parts = subject[len(head) :].split(".")
    match parts:
        case ["requests"]:
            return Family.REQUESTS, ""
        case ["timers"]:
            return Family.TIMERS, ""
        case ["decisions", name] if name == HOSTS_TOKEN:
            return Family.HOST_DECISIONS, name
        case ["decisions", name] if name:
            return Family.DECISIONS, name
        case ["reports", host] if host:
            return Family.REPORTS, host
    return None


def refusal(event: Event, subject: str, prefix: str) -> str | None:
    """Why `event` must not be folded from `subject` (None: it may).

    A report names its host (`host_id` or `host`); it must be the subject's host.
    """
    return refusal_on(event, subject, family_of(subject, prefix))


def refusal_on(event: Event, subject: str, found: tuple[Family, str] | None) -> str | None:
    """`refusal` with the subject already parsed (`family_of`): once per message."""
    tag = tag_of(event)
    allowed = FAMILIES.get(tag)
    if allowed is None:
        return f"{tag} has no subject family"
    if found is None or found[0] not in allowed:
        families = ", ".join(sorted(allowed))
        return f"{tag} belongs on {families}, not on {subject}"
    family, name = found
    if family is Family.REPORTS:
        host = getattr(event, "host_id", None) or getattr(event, "host", None)
        if not isinstance(host, str) or token(host) != name:
            return f"{tag} of host {host!r} on another host's subject {subject}"
    return None
