"""Each agent reads only its own host's views: what it reads does not grow with other hosts.

Three agents on one log; jobs run on h1 only. h1's agent reads a view per change of
its host; h2's and h3's read none after their registration, however many jobs ran.
A restarted agent picks up from its host's newest view and runs nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from node_agent_harness import UNIT, Cluster, payload

from qm_node_agent.agent import NodeAgent
from quartermaster import events as ev
from quartermaster.bus.feed import fast_subject, feed_stream, feed_subject
from quartermaster.core import JobStatus
from quartermaster.eventlog import host_relay, subjects
from quartermaster.eventlog.host_feed import decode_view
from quartermaster.eventlog.host_reader import HostFeedFollower

LOOP = "while true; do sleep 0.05; done"


def reads(agent: object) -> int:
    follower = agent._follower  # type: ignore[attr-defined]
    assert isinstance(follower, HostFeedFollower)
    return follower.messages_read


async def test_an_agent_reads_only_its_own_hosts_views(cluster: Cluster) -> None:
    agents = [cluster.agent(cluster.settings(host)) for host in ("h1", "h2", "h3")]
    async with agents[0], agents[1], agents[2]:
        for host in ("h1", "h2", "h3"):
            await cluster.until_host(host)
        await cluster.relay.flush()
        await cluster.until("h2 and h3 have their views", lambda: agents[1].state.hosts != {})
        others_before = [reads(agents[1]), reads(agents[2])]
        h1_before = reads(agents[0])
        for n in range(5):
            await cluster.run(f"j{n}", payload("echo hello"))
            await cluster.until_status(f"j{n}", JobStatus.SUCCEEDED)
        await cluster.relay.flush()
        h1_after = reads(agents[0])
        others_after = [reads(agents[1]), reads(agents[2])]
    assert h1_after - h1_before >= 5  # at least one view per job, on its own host
    assert others_after == others_before  # nothing of h1's jobs reached h2 or h3


async def test_the_feed_keeps_one_view_per_host(cluster: Cluster) -> None:
    async with cluster.agent(cluster.settings("h1")):
        await cluster.until_host("h1")
        await cluster.run("j", payload("echo hello"))
        await cluster.until_status("j", JobStatus.SUCCEEDED)
        await cluster.relay.flush()
    js, stream = cluster.log.js, feed_stream(cluster.log.stream)
    info = await js.stream_info(stream)
    assert info.state.messages == 1
    last = await js.get_last_msg(stream, feed_subject("h1", cluster.log.prefix))
    assert last.data is not None
    assert decode_view(last.data).jobs == []  # h1's newest view: the job is over


async def test_a_restarted_agent_resumes_from_its_newest_view(cluster: Cluster) -> None:
    """Stopped while its job runs, the agent starts again from the feed, re-adopts the
    job (one start only) and stops it when the log says so."""
    async with cluster.agent(cluster.settings("h1")):
        await cluster.until_host("h1")
        await cluster.run("long", payload(LOOP))
        await cluster.until_status("long", JobStatus.RUNNING)
    async with cluster.agent(cluster.settings("h1")) as again:
        await cluster.until("the view came back", lambda: "long" in again.state.jobs)
        await cluster.terminate("long")
        await cluster.until_reported("long", ev.JobStopConfirmed)
        await cluster.until_status("long", JobStatus.FAILED)
    assert len(cluster.reported("long", ev.JobStarting)) == 1
    assert len(cluster.reported("long", ev.JobStopConfirmed)) == 1


async def test_a_restarted_agent_skips_a_stored_view_older_than_it_acted_on(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The feed holds a view from before the job's dispatch (the newest is not stored yet):
    the restarted agent neither stops the job it runs nor forgets it, and goes on with it
    once the newest view is stored."""
    monkeypatch.setattr(host_relay, "STORE_EVERY_S", 3600.0)  # stored once, then not again
    async with cluster.agent(cluster.settings("h1")) as first:
        await cluster.until_host("h1")
        await cluster.run("long", payload(LOOP))
        await cluster.until_status("long", JobStatus.RUNNING)
        launched_from = first.log_position
    js, stream = cluster.log.js, feed_stream(cluster.log.stream)
    stored = await js.get_last_msg(stream, feed_subject("h1", cluster.log.prefix))
    assert stored.data is not None and decode_view(stored.data).seq < launched_from
    await cluster.relay.stop()  # no newer view comes while the agent starts again
    async with cluster.agent(cluster.settings("h1")) as again:
        await asyncio.sleep(1.0)  # the stale view read and skipped: nothing stopped
        assert again.log_position == launched_from and again.state.jobs == {}
        assert cluster.reported("long", ev.JobStopConfirmed) == []
        monkeypatch.setattr(host_relay, "STORE_EVERY_S", 0.0)  # the newest goes out now
        await cluster.relay.start()
        await cluster.terminate("long")  # a new view: sent and stored
        await cluster.until_reported("long", ev.JobStopConfirmed)
        await cluster.until_status("long", JobStatus.FAILED)
    assert len(cluster.reported("long", ev.JobStarting)) == 1


async def test_the_views_of_a_job_over_several_hosts_are_published_together(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every host's view is in flight before any is acked: the last host of a job does not
    wait for the others' round trips (published one by one, the peak would be 1)."""
    monkeypatch.setattr(host_relay, "STORE_EVERY_S", 0.0)  # every view stored as it is sent
    hosts = ("h1", "h2", "h3")
    for host in hosts:
        registered = ev.HostRegistered(
            at=time.time(), host_id=host, instance_type=UNIT, gpu_count=0
        )
        await cluster.append(subjects.reports(host, cluster.log.prefix), registered)
    await cluster.relay.flush()
    await cluster.submit("wide", payload("true"))
    await cluster.relay.flush()
    js = cluster.log.js
    real_publish = js.publish
    in_flight = peak = 0
    all_in = asyncio.Event()

    async def publish(*args: Any, **kwargs: Any) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == len(hosts):
            all_in.set()
        try:
            with contextlib.suppress(TimeoutError):  # one by one: each waits here alone
                async with asyncio.timeout(1.0):
                    await all_in.wait()
            return await real_publish(*args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(js, "publish", publish)
    await cluster.dispatch("wide", hosts)
    await cluster.relay.flush()
    assert peak == len(hosts)


async def test_an_agent_on_a_share_of_its_process_fold_needs_no_feed(cluster: Cluster) -> None:
    """`qm up` may hand its agents a share of the fold it runs anyway: no relay hop."""
    await cluster.relay.stop()  # nobody relays views: only the fold can tell the agent
    share = cluster.follower.share()
    async with NodeAgent(cluster.settings("h1"), cluster.log, shared=share) as agent:
        assert agent.read_side is share
        await cluster.until_host("h1")
        await cluster.run("j", payload("echo hello"))
        await cluster.until_status("j", JobStatus.SUCCEEDED)
    await cluster.run("after", payload("echo hello"))  # the fold reads on without it
    assert "after" in cluster.follower.state.jobs


def views_sent(cluster: Cluster, monkeypatch: pytest.MonkeyPatch, host: str) -> list[Any]:
    """Each view of `host` the relay publishes from now on, decoded, in order."""
    js = cluster.log.js
    real_publish = js.publish
    sent: list[Any] = []
    subject = feed_subject(host, cluster.log.prefix)

    async def publish(to: str, data: bytes, *args: Any, **kwargs: Any) -> Any:
        if to == subject:
            sent.append(decode_view(data))
        return await real_publish(to, data, *args, **kwargs)

    monkeypatch.setattr(js, "publish", publish)
    return sent


async def ended_on_h1(cluster: Cluster, job_id: str) -> None:
    """h1's reports of a short job, as its agent sends them: the job ends, h1 is free."""
    job = cluster.job(job_id)
    at, attempt = time.time(), job.attempt_no
    reports = subjects.reports("h1", cluster.log.prefix)
    await cluster.append(
        reports,
        ev.JobStarting(at=at, job_id=job_id, attempt=attempt, host="h1"),
        ev.JobRunning(at=at, job_id=job_id, attempt=attempt, host="h1"),
    )
    succeeded = ev.JobSucceeded(at=at, job_id=job_id, attempt=attempt, host="h1", exit_code=0)
    await cluster.append(reports, succeeded)


async def h1_registered(cluster: Cluster) -> None:
    registered = ev.HostRegistered(at=time.time(), host_id="h1", instance_type=UNIT, gpu_count=0)
    await cluster.append(subjects.reports("h1", cluster.log.prefix), registered)
    await cluster.relay.flush()


async def test_a_view_that_only_frees_its_host_goes_out_with_the_next_dispatch(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job ends on h1 and the next job is dispatched there soon after: h1's agent gets
    one view, the new job's, not a view of the free host first."""
    await h1_registered(cluster)
    await cluster.run("first", payload("true"))
    await cluster.submit("next", payload("true"))
    await cluster.relay.flush()
    sent = views_sent(cluster, monkeypatch, "h1")
    await ended_on_h1(cluster, "first")
    await asyncio.sleep(0.05)  # the scheduler's pass
    await cluster.dispatch("next")
    await cluster.relay.flush()
    assert [(v.host.holder, [j.job_id for j in v.jobs]) for v in sent] == [("next", ["next"])]


async def test_a_freed_host_no_dispatch_comes_for_gets_its_view(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The held view goes out on its own once no dispatch came: h1's agent learns the
    job is over (and forgets its record) without waiting for another change."""
    await h1_registered(cluster)
    await cluster.run("only", payload("true"))
    await cluster.relay.flush()
    sent = views_sent(cluster, monkeypatch, "h1")
    await ended_on_h1(cluster, "only")
    await cluster.until("h1's view shows it free", lambda: bool(sent), timeout=5)
    ((view,),) = [sent]
    assert (view.host.holder, view.jobs) == (None, [])


async def test_a_freed_host_whose_entry_changes_too_gets_its_view_at_once(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held is only a view that frees its host and says nothing else new: a drain in the
    same message goes out without waiting."""
    monkeypatch.setattr(host_relay, "HOLD_S", 3600.0)
    await h1_registered(cluster)
    await cluster.run("drained", payload("true"))
    await cluster.relay.flush()
    sent = views_sent(cluster, monkeypatch, "h1")
    await ended_on_h1(cluster, "drained")
    await cluster.request(ev.HostDrained(at=time.time(), host_id="h1"))
    await cluster.until("h1's view shows the drain", lambda: bool(sent), timeout=5)
    assert sent[-1].host.holder is None and sent[-1].host.drained


async def test_a_busy_hosts_views_go_out_at_once_and_the_newest_is_stored(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each view goes at once on the host's unstored subject; the feed stores a host's view
    at most once per STORE_EVERY_S, the newest then (each view is whole)."""
    monkeypatch.setattr(host_relay, "STORE_EVERY_S", 2.0)
    sent: list[int] = []  # the log position of each view sent at once

    async def on_view(msg: Any) -> None:
        sent.append(decode_view(msg.data).seq)

    fast = await cluster.log.nc.subscribe(fast_subject("h1", cluster.log.prefix), cb=on_view)
    await cluster.append(
        subjects.reports("h1", cluster.log.prefix),
        ev.HostRegistered(at=time.time(), host_id="h1", instance_type=UNIT, gpu_count=0),
    )
    await cluster.until("the registration's view sent", lambda: bool(sent))
    js, stream = cluster.log.js, feed_stream(cluster.log.stream)
    stored_before = cluster.relay.stored
    # Two views within the window (the job to run, then to stop), each sent at once.
    await cluster.submit("j", payload("true"))
    await cluster.dispatch("j")
    await cluster.until("the dispatch's view sent", lambda: len(sent) >= 2)
    await cluster.terminate("j")
    await cluster.until("the termination's view sent", lambda: len(sent) >= 3)
    newest = sent[-1]
    assert cluster.relay.stored == stored_before  # within the window: none stored yet
    await cluster.relay.flush(timeout=5)  # the window ends: the newest is stored
    await fast.unsubscribe()
    assert cluster.relay.stored == stored_before + 1
    last = await js.get_last_msg(stream, feed_subject("h1", cluster.log.prefix))
    assert last.data is not None and decode_view(last.data).seq == newest
    assert [job.job_id for job in decode_view(last.data).jobs] == ["j"]
