"""What the folded log wants from a host, over histories the real scheduler pass produces."""

from __future__ import annotations

from qm_node_agent.desired import (
    attempt_on,
    cache_chains,
    is_current,
    should_run,
    stop_reason,
    stop_wanted,
)
from quartermaster import events as ev
from quartermaster.testing.builders import World, a_job


def world(hosts: int = 1) -> World:
    w = World().environment(ml_g5_xlarge=4).queue().hosts(hosts)
    w.share("QS1", 4, "LEND_AND_BORROW")
    return w


def test_a_dispatched_attempt_is_to_run_on_its_host_and_keeps_its_cache() -> None:
    w = world()
    j = w.submit(a_job(name="j"))
    w.pass_()

    job = attempt_on(w.state, "h1")
    assert job is not None and job.job_id == j
    assert should_run(job, "h1")
    assert is_current(w.state, "h1", j, 1)
    assert stop_reason(w.state, "h1", j, 1) is None
    assert cache_chains(w.state, "h1") == {j}


def test_a_free_host_has_nothing_to_run_and_no_cache() -> None:
    w = world()
    assert attempt_on(w.state, "h1") is None
    assert attempt_on(w.state, "unknown") is None
    assert cache_chains(w.state, "h1") == set()


def test_a_preempted_attempt_is_to_stop_until_its_stop_is_confirmed() -> None:
    w = world()
    j = w.submit(a_job(name="j"))
    w.pass_()
    w.start(j)
    w.apply(ev.JobPreemptionRequested(at=w.clock, job_id=j, attempt=1, reason="r", for_job="x"))

    job = attempt_on(w.state, "h1")
    assert job is not None
    assert not should_run(job, "h1")
    assert stop_wanted(job, "h1")
    assert stop_reason(w.state, "h1", j, 1) == "PREEMPTED: r"

    w.confirm_stop(j)
    assert not is_current(w.state, "h1", j, 1)
    assert attempt_on(w.state, "h1") is None
    assert cache_chains(w.state, "h1") == set()


def test_a_terminated_attempt_is_to_stop() -> None:
    w = world()
    j = w.submit(a_job(name="j"))
    w.pass_()
    w.start(j)
    w.terminate(j, "user cancelled")

    assert stop_reason(w.state, "h1", j, 1) == "TERMINATED: user cancelled"


def test_a_peer_failure_stops_the_other_hosts_of_the_attempt() -> None:
    w = world(2)
    j = w.submit(a_job(name="j", count=2))
    w.pass_()
    w.start(j)
    w.fail(j)  # h1 fails

    assert not is_current(w.state, "h1", j, 1)
    assert stop_reason(w.state, "h2", j, 1) == "PEER_FAILED: AlgorithmError: exit 1"


def test_a_part_on_a_host_declared_lost_is_no_longer_current() -> None:
    w = world()
    j = w.submit(a_job(name="j"))
    w.pass_()
    w.start(j)
    w.lose_host("h1")

    assert stop_reason(w.state, "h1", j, 1) == "the attempt no longer runs on this host"


def test_the_cache_follows_the_warm_pool_chain_until_the_pool_ends() -> None:
    w = world()
    first = w.submit(a_job(name="first", keep_alive=60))
    w.pass_()
    w.start(first).succeed(first)
    # retained while the pass decides: still kept
    assert cache_chains(w.state, "h1") == {first}
    w.pass_()
    assert w.state.pools[first].status.value == "Available"
    assert cache_chains(w.state, "h1") == {first}
    # a matching job takes the pool: same chain, same cache
    second = w.submit(a_job(name="second", keep_alive=60))
    w.pass_()
    job = attempt_on(w.state, "h1")
    assert job is not None and job.job_id == second and job.chain_id == first
    assert should_run(job, "h1")
    assert cache_chains(w.state, "h1") == {first}
    w.start(second).succeed(second)
    w.pass_()
    assert cache_chains(w.state, "h1") == {first}
    # the pool expires: the cache goes
    w.tick(61)
    w.pass_()
    assert w.state.pools[second].status.value == "Terminated"
    assert cache_chains(w.state, "h1") == set()


def test_an_attempt_ending_without_a_pool_drops_the_cache() -> None:
    w = world()
    j = w.submit(a_job(name="j"))
    w.pass_()
    w.start(j).succeed(j)

    assert cache_chains(w.state, "h1") == set()
    assert not is_current(w.state, "h1", j, 1)
