"""Each host's share of the folded log: what its node agent needs, derived from the log.

A node agent acts only on its own host's entry, the jobs whose attempt runs (or
stops) there, and the warm pool that keeps it. The scheduler derives that view
from the state it folds and publishes it on `<p>_hosts.<host>.cmd` in the feed
stream (`<stream>_HOSTS`, one message kept per host), so an agent reads one
message per change of its own host, however many hosts the platform has. The log
stays the only truth: a view is a function of the state at the log position it
names (`seq`), and an agent never goes back to an older one.

Pure: no I/O (the stream and its reader: `bus.feed`; the relay: `eventlog.host_relay`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from quartermaster import events as ev
from quartermaster.core import Host, Job, State
from quartermaster.core.model import WarmPool
from quartermaster.events import AnyEvent


class HostView(msgspec.Struct, frozen=True):
    """One host's share of the state at log position `seq`.

    `jobs`: the holder and every job whose current attempt still has this host
    (not yet ended there); `pools`: the pool holding the host, if any; `traces`:
    the newest trace context of each of those jobs (its dispatch's, for a start).
    """

    seq: int
    host_id: str
    host: Host | None = None
    jobs: list[Job] = []
    pools: list[WarmPool] = []
    traces: dict[str, str] = {}


def live_on(job: Job, host_id: str) -> bool:
    """Does the job's current attempt still have this host (its part not ended)?"""
    return host_id in job.hosts and host_id not in job.ended_hosts


def view_of(
    state: State,
    host_id: str,
    seq: int,
    candidates: Iterable[str] = (),
    trace_of: Callable[[str], str | None] | None = None,
) -> HostView:
    """The view of `host_id` at `seq`; `candidates`: job ids that may be live on it."""
    host = state.hosts.get(host_id)
    wanted = set(candidates)
    if host is not None and host.holder is not None:
        wanted.add(host.holder)
    jobs: list[Job] = []
    for job_id in sorted(wanted):
        job = state.jobs.get(job_id)
        if job is not None and (live_on(job, host_id) or job_id == getattr(host, "holder", None)):
            jobs.append(job)
    pools: list[WarmPool] = []
    if host is not None and host.holder is not None:
        pool = state.pools.get(host.holder)
        if pool is not None:
            pools.append(pool)
    job_traces: dict[str, str] = {}
    if trace_of is not None:
        for job in jobs:
            traceparent = trace_of(job.job_id)
            if traceparent is not None:
                job_traces[job.job_id] = traceparent
    # Heartbeat times change often and the agent needs none: left out, so a heartbeat
    # changes no view and sends nothing.
    shown = None if host is None else msgspec.structs.replace(host, last_heartbeat=0.0)
    return HostView(seq, host_id, shown, jobs, pools, job_traces)


# Reports of a start's progress change a job's status among the active ones, `started`
# and `running_at`, and nothing the agent's rules (`qm_node_agent.desired`) read: whether
# a part should run, should stop or is current, and which caches a host keeps. The agent
# that sent them already acts on them, the other hosts of a gang have nothing to do, so
# they mark no view. A view that goes out for another reason carries them, and the relay's
# resync sends one that differs only by them (`eventlog.host_relay`).
PROGRESS_REPORTS = (ev.JobStarting, ev.JobRunning)


def touched(state: State, events: Iterable[AnyEvent]) -> tuple[set[str], set[str]]:
    """Hosts and jobs a batch of (folded) events names: the views it may change in what
    the agents act on (progress reports: none)."""
    hosts: set[str] = set()
    jobs: set[str] = set()
    for event in events:
        if isinstance(event, PROGRESS_REPORTS):
            continue
        for name in ("host_id", "host"):
            value = getattr(event, name, None)
            if isinstance(value, str):
                hosts.add(value)
        named = getattr(event, "hosts", None)
        if isinstance(named, tuple):
            hosts.update(h for h in named if isinstance(h, str))
        for name in ("job_id", "for_job", "warm_pool"):
            value = getattr(event, name, None)
            if isinstance(value, str):
                jobs.add(value)
    for job_id in jobs:
        job = state.jobs.get(job_id)
        if job is not None:
            hosts.update(job.hosts)
        pool = state.pools.get(job_id)
        if pool is not None:
            hosts.update(pool.hosts)
    return hosts, jobs


def as_state(view: HostView) -> State:
    """A State holding only the view's entries: what the agent's rules (`desired`) read."""
    state = State()
    if view.host is not None:
        state.hosts[view.host_id] = view.host
    for job in view.jobs:
        state.jobs[job.job_id] = job
    for pool in view.pools:
        state.pools[pool.job_id] = pool
    return state


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(HostView)


def encode_view(view: HostView) -> bytes:
    return _encoder.encode(view)


def decode_view(data: bytes) -> HostView:
    return _decoder.decode(data)
