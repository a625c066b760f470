"""Which read-model rows a run of batches changes.

Ids come from the events' own fields (job_id, for_job, host, hosts, names of
configuration), then follow the links of the state both before and after the
fold: a job to the hosts it holds, a host to the job or pool holding it, a job
to the warm pool named after it. So a lost host rewrites the job it ran, and a
released job rewrites the hosts it freed. Capacity figures (environment
capacity, share usage) are recomputed for the queues and environments such a
change can move; the projector writes only those documents that differ.
"""

from __future__ import annotations

from collections.abc import Iterable

from quartermaster import events as ev
from quartermaster.core.state import State

_JOB_FIELDS = ("job_id", "for_job", "reused_by_job", "from_job", "warm_pool")
_HOST_FIELDS = ("host_id", "host")


class Changes:
    """Entity keys touched by a run of batches, collected around each fold."""

    def __init__(self) -> None:
        self.jobs: set[str] = set()  # job ids; a warm pool has its job's id
        self.hosts: set[str] = set()
        self.policies: set[str] = set()
        self.queues: set[str] = set()
        self.environments: set[str] = set()
        self.shares: set[tuple[str, str]] = set()
        self.capacity_queues: set[str] = set()  # queues whose shares' usage may have moved
        self.capacity_environments: set[str] = set()
        self.created_at: dict[tuple[str, ...], float] = {}  # config key -> its Created event
        self.first_at: dict[tuple[str, ...], float] = {}  # config key -> first event's time
        self.attempts_from: dict[str, int] = {}  # job id -> first attempt index to write

    # ---- collection ----------------------------------------------------------------

    def before_fold(self, state: State, events: Iterable[ev.Event]) -> None:
        """Note the keys named by `events`, then follow links in the state they change."""
        for event in events:
            self._note(event)
        self._follow_links(state)
        for job_id in self.jobs:
            if job_id not in self.attempts_from:
                job = state.jobs.get(job_id)
                self.attempts_from[job_id] = max(0, len(job.attempts) - 1) if job else 0

    def after_fold(self, state: State) -> None:
        """Follow links in the folded state; settle which capacity figures to recompute."""
        self._follow_links(state)
        for job_id in self.jobs:
            job = state.jobs.get(job_id)
            if job is not None:
                self.capacity_queues.add(job.queue)
            pool = state.pools.get(job_id)
            if pool is not None:
                self.capacity_queues.add(pool.queue)
        units = {state.hosts[h].unit for h in self.hosts if h in state.hosts}
        for name, environment in state.environments.items():
            if units & environment.max_capacity.keys():
                self.capacity_environments.add(name)
        self.capacity_environments |= self.environments
        for queue in self.capacity_queues | self.queues:
            if queue in state.queues:
                self.capacity_environments.add(state.queues[queue].environment)

    def _note(self, event: ev.Event) -> None:
        for field in _JOB_FIELDS:
            value = getattr(event, field, None)
            if isinstance(value, str):
                self.jobs.add(value)
        for field in _HOST_FIELDS:
            value = getattr(event, field, None)
            if isinstance(value, str):
                self.hosts.add(value)
        self.hosts.update(getattr(event, "hosts", ()))
        if isinstance(event, ev.ServiceEnvironmentCreated | ev.ServiceEnvironmentUpdated):
            self.environments.add(event.name)
            self._config(("environment", event.name), event, ev.ServiceEnvironmentCreated)
        elif isinstance(event, ev.SchedulingPolicyCreated):
            self.policies.add(event.name)
            self._config(("policy", event.name), event, ev.SchedulingPolicyCreated)
        elif isinstance(event, ev.JobQueueCreated | ev.JobQueueUpdated):
            self.queues.add(event.name)
            self.capacity_queues.add(event.name)
            self._config(("queue", event.name), event, ev.JobQueueCreated)
        elif isinstance(event, ev.QuotaShareCreated | ev.QuotaShareUpdated | ev.QuotaShareDeleted):
            self.shares.add((event.job_queue, event.name))
            self.capacity_queues.add(event.job_queue)  # siblings' oversubscription moves
            self._config(("share", event.job_queue, event.name), event, ev.QuotaShareCreated)
        elif isinstance(event, ev.ServiceEnvironmentDeleted):
            self.environments.add(event.name)
        elif isinstance(event, ev.SchedulingPolicyUpdated | ev.SchedulingPolicyDeleted):
            self.policies.add(event.name)
        elif isinstance(event, ev.JobQueueDeleted):
            self.queues.add(event.name)
        elif isinstance(event, ev.ResourceTagged | ev.ResourceUntagged):
            self._tagged(event)

    def _tagged(self, event: ev.ResourceTagged | ev.ResourceUntagged) -> None:
        kind = event.kind
        if kind is ev.ResourceKind.SERVICE_ENVIRONMENT:
            self.environments.add(event.name)
        elif kind is ev.ResourceKind.SCHEDULING_POLICY:
            self.policies.add(event.name)
        elif kind is ev.ResourceKind.JOB_QUEUE:
            self.queues.add(event.name)
        elif kind is ev.ResourceKind.QUOTA_SHARE:
            self.shares.add((event.job_queue, event.name))
        else:
            self.jobs.add(event.name)

    def _config(self, key: tuple[str, ...], event: ev.Event, created: type[ev.Event]) -> None:
        self.first_at.setdefault(key, event.at)
        if isinstance(event, created):
            self.created_at[key] = event.at

    def _follow_links(self, state: State) -> None:
        """Close the sets over job <-> hosts and host -> holder (job or pool)."""
        jobs, hosts = list(self.jobs), list(self.hosts)
        while jobs or hosts:
            while jobs:
                job_id = jobs.pop()
                job = state.jobs.get(job_id)
                pool = state.pools.get(job_id)
                held = (job.hosts if job else ()) + (pool.hosts if pool else ())
                for host_id in held:
                    if host_id not in self.hosts:
                        self.hosts.add(host_id)
                        hosts.append(host_id)
            while hosts:
                host = state.hosts.get(hosts.pop())
                if host is not None and host.holder and host.holder not in self.jobs:
                    self.jobs.add(host.holder)
                    jobs.append(host.holder)
