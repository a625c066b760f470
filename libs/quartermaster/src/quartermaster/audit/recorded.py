"""A recorded log's jobs as simulation input, and the configuration the log ran with.

Each job that ran arrives when it was created and lasts as long as its last
attempt ran (to its end, or to the end of the log if it was still running);
jobs that never ran have no known duration and are left out, and counted.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from quartermaster import events as ev
from quartermaster.audit.envelope import Envelope, admit
from quartermaster.audit.errors import ConfigError
from quartermaster.audit.simconfig import ShareConfig, SimConfig
from quartermaster.audit.simulate import SimJob
from quartermaster.core import State, fold
from quartermaster.core.replay import replaying


class Recorded(msgspec.Struct, frozen=True):
    queue: str
    config: SimConfig
    jobs: list[SimJob]
    never_ran: int

    def summary(self) -> str:
        return (
            f"recorded queue {self.queue}: {len(self.jobs)} jobs that ran "
            f"({self.never_ran} that never ran are left out)"
        )

    def jobs_for(self, config: SimConfig) -> list[SimJob]:
        """The jobs, checked against a candidate: their shares and units must exist there."""
        for job in self.jobs:
            if config.share(job.share) is None:
                raise ConfigError(f"shares: the recorded share {job.share!r} is missing")
            if job.unit not in config.capacity:
                raise ConfigError(f"capacity: the recorded unit {job.unit!r} is missing")
        return self.jobs


def recorded_jobs(envelopes: Iterable[Envelope], queue: str | None = None) -> Recorded:
    state = State()
    submitted_priority: dict[str, int] = {}
    with replaying(state):
        for envelope in envelopes:
            for event in admit(envelope)[0]:
                if isinstance(event, ev.JobSubmitted) and event.job_id not in state.jobs:
                    submitted_priority[event.job_id] = event.scheduling_priority
                fold(state, event)
    if queue is None:
        if len(state.queues) != 1:
            names = ", ".join(sorted(state.queues)) or "none"
            raise ConfigError(f"--queue: the log has several queues or none ({names})")
        queue = next(iter(state.queues))
    if queue not in state.queues:
        raise ConfigError(f"--queue: {queue!r} is not a queue of the log")
    jobs_of_queue = [j for j in state.jobs.values() if j.queue == queue]
    start = min((j.created_at for j in jobs_of_queue), default=0.0)
    jobs, never_ran = [], 0
    for job in sorted(jobs_of_queue, key=lambda j: (j.created_at, j.job_id)):
        ran = [a for a in job.attempts if a.started_at is not None]
        if not ran:
            never_ran += 1
            continue
        last = ran[-1]
        assert last.started_at is not None
        end = last.stopped_at if last.stopped_at is not None else state.now
        jobs.append(
            SimJob(
                job.job_id,
                job.share,
                job.share,
                job.unit,
                job.count,
                submitted_priority.get(job.job_id, job.priority),
                job.created_at - start,
                max(end - last.started_at, 1e-3),
                job.keep_alive_seconds,
            )
        )
    return Recorded(queue, _config(state, queue), jobs, never_ran)


def _config(state: State, queue: str) -> SimConfig:
    env = state.environments[state.queues[queue].environment]
    hosts: dict[str, int] = {}
    for host in state.hosts.values():
        if host.environment in (None, env.name):
            hosts[host.unit] = hosts.get(host.unit, 0) + 1
    capacity = {u: min(n, hosts.get(u, 0)) for u, n in env.max_capacity.items()}
    shares = [
        ShareConfig(s.name, dict(s.limits), s.strategy, s.borrow_limit, s.in_share_preemption)
        for s in state.shares_of(queue)
    ]
    return SimConfig(capacity=capacity, shares=shares)
