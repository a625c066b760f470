"""Folded capacity state plus the indexes the pass needs to stay logarithmic.

The entities (config, jobs, hosts, pools) are the truth; every index below is
derived from them and maintained incrementally by the fold, so one dispatch
costs O(log n) in the number of queued jobs instead of a rescan. The sorted ones
take the fold's changes when they are read (`core.sorted_index`): a replay pays
nothing for the entries that come and go before anyone reads.
"""

from __future__ import annotations

from collections import defaultdict

from sortedcontainers import SortedList

from quartermaster.core.model import (
    HOST_HEALTHY,
    POOL_AVAILABLE,
    Environment,
    Host,
    HostStatus,
    Job,
    Queue,
    Share,
    WarmPool,
)
from quartermaster.core.preemption import victim_order
from quartermaster.core.sorted_index import SortedIndex

ShareKey = tuple[str, str, str]  # (queue, share, unit)
EnvUnit = tuple[str, str]  # (environment, unit)
DEADLINES = "deadlines"  # keys of `State.timeline`
POOL_EXPIRIES = "pool_expiries"


class State:
    """Everything the scheduler knows at one position of the log."""

    def __init__(self) -> None:
        self.now: float = 0.0
        self.seq: int = 0  # events folded
        self.environments: dict[str, Environment] = {}
        self.policies: dict[str, str] = {}
        self.policy_tags: dict[str, dict[str, str]] = {}  # policy name -> its tags
        self.queues: dict[str, Queue] = {}
        self.shares: dict[tuple[str, str], Share] = {}
        self.jobs: dict[str, Job] = {}
        self.hosts: dict[str, Host] = {}
        self.pools: dict[str, WarmPool] = {}
        # -- derived indexes (the fold's changes are applied when read: `core.sorted_index`) --
        self.runnable: SortedIndex[ShareKey] = SortedIndex()
        self.victims: SortedIndex[ShareKey] = SortedIndex()  # victim_order
        self.use: dict[ShareKey, int] = defaultdict(int)  # units held, per share and unit
        self.stopping: dict[ShareKey, int] = defaultdict(int)  # of `use`: stop not confirmed
        self.env_use: dict[EnvUnit, int] = defaultdict(int)
        self.free_unbound: SortedIndex[str] = SortedIndex()  # unit -> hosts
        self.free_bound: SortedIndex[EnvUnit] = SortedIndex()
        self.available_pools: SortedIndex[EnvUnit] = SortedIndex()
        # DEADLINES: (deadline, job_id); POOL_EXPIRIES: (expires_at, job_id)
        self.timeline: SortedIndex[str] = SortedIndex()
        self.awaiting_outcome: set[str] = set()
        self.retained: set[str] = set()
        self.queue_shares: dict[str, dict[str, Share]] = defaultdict(dict)  # queue -> name -> share
        # -- change counters: what an incremental pass (`core.incremental`) compares --
        self.queue_version: dict[str, int] = defaultdict(int)  # anything of the queue's changed
        self.config_version: int = 0  # environments, policies, unknown events: every queue
        self.pools_version: dict[EnvUnit, int] = defaultdict(int)  # available pools changed
        # -- retention (`core.retention`): None keeps terminal jobs forever --
        self.retention_seconds: float | None = None
        self.next_sweep: float = 0.0

    @property
    def deadlines(self) -> SortedList:
        return self.timeline[DEADLINES]

    @property
    def pool_expiries(self) -> SortedList:
        return self.timeline[POOL_EXPIRIES]

    def settle_indexes(self) -> None:
        """Apply the fold's pending index changes now (every read does so anyway)."""
        for index in (
            self.runnable,
            self.victims,
            self.free_unbound,
            self.free_bound,
            self.available_pools,
            self.timeline,
        ):
            index.settle()

    # ---- queries -------------------------------------------------------
    def share_key(self, job: Job) -> ShareKey:
        return (job.queue, job.share, job.unit)

    def environment_of(self, queue: str) -> str:
        return self.queues[queue].environment

    def shares_of(self, queue: str) -> list[Share]:
        found = self.queue_shares.get(queue)
        return sorted(found.values(), key=lambda s: s.name) if found else []

    def put_share(self, share: Share) -> None:
        self.shares[(share.queue, share.name)] = share
        self.queue_shares[share.queue][share.name] = share

    def drop_share(self, queue: str, name: str) -> None:
        self.shares.pop((queue, name), None)
        self.queue_shares[queue].pop(name, None)

    # ---- change counters ----------------------------------------------
    def touch_job(self, job_id: str) -> None:
        """Something of this job (or pool: same id) changed: its queue decides again."""
        job = self.jobs.get(job_id)
        if job is not None:
            self.queue_version[job.queue] += 1
            return
        pool = self.pools.get(job_id)
        if pool is not None:
            self.queue_version[pool.queue] += 1

    # ---- host allocation ----------------------------------------------
    def _free_list(self, host: Host) -> SortedList:
        """The free list the host belongs on (a read: pending changes are applied)."""
        if host.environment is None:
            return self.free_unbound[host.unit]
        return self.free_bound[(host.environment, host.unit)]

    def mark_free(self, host: Host) -> None:
        """A host with no holder is free if it is healthy."""
        host.holder = None
        host.holder_env = None
        if host.status is HOST_HEALTHY:
            if host.environment is None:
                self.free_unbound.put(host.unit, host.host_id)
            else:
                self.free_bound.put((host.environment, host.unit), host.host_id)

    def not_free(self, host: Host) -> None:
        """The host leaves its free list (if it is on it)."""
        if host.environment is None:
            self.free_unbound.drop(host.unit, host.host_id)
        else:
            self.free_bound.drop((host.environment, host.unit), host.host_id)

    def take_host(self, host_id: str, holder: str, env: str) -> None:
        host = self.hosts[host_id]
        if host.environment is None:
            self.free_unbound.drop(host.unit, host_id)
        else:
            self.free_bound.drop((host.environment, host.unit), host_id)
        host.holder = holder
        host.holder_env = env

    def unhealthy(self, host: Host, status: HostStatus) -> None:
        if host.holder is None:
            self.not_free(host)
        host.status = status

    def charge(self, key: ShareKey, env: str, units: int) -> None:
        self.use[key] += units
        self.env_use[(env, key[2])] += units

    # ---- job indexes --------------------------------------------------
    def enqueue(self, job: Job) -> None:
        self.runnable.put((job.queue, job.share, job.unit), job.queue_entry())

    def dequeue(self, job: Job) -> None:
        self.runnable.drop((job.queue, job.share, job.unit), job.queue_entry())

    def add_victim(self, job: Job) -> None:
        self.victims.put((job.queue, job.share, job.unit), victim_order(job))  # ends with the id

    def drop_victim(self, job: Job) -> None:
        self.victims.drop((job.queue, job.share, job.unit), victim_order(job))

    def set_deadline(self, job: Job) -> None:
        deadline = job.deadline()
        if deadline is not None:
            self.timeline.put(DEADLINES, (deadline, job.job_id))

    def clear_deadline(self, job: Job) -> None:
        deadline = job.deadline()
        if deadline is not None:
            self.timeline.drop(DEADLINES, (deadline, job.job_id))

    # ---- warm pools ---------------------------------------------------
    def index_pool(self, pool: WarmPool) -> None:
        assert pool.expires_at is not None
        entry = (pool.expires_at, pool.job_id)
        key = (pool.environment, pool.unit)
        self.available_pools.put(key, entry)
        self.timeline.put(POOL_EXPIRIES, entry)
        self.pools_version[key] += 1

    def unindex_pool(self, pool: WarmPool) -> None:
        assert pool.expires_at is not None
        entry = (pool.expires_at, pool.job_id)
        key = (pool.environment, pool.unit)
        self.available_pools.drop(key, entry)
        self.timeline.drop(POOL_EXPIRIES, entry)
        self.pools_version[key] += 1

    def is_available(self, pool_id: str | None) -> bool:
        if pool_id is None:
            return False
        pool = self.pools.get(pool_id)
        return pool is not None and pool.status is POOL_AVAILABLE
