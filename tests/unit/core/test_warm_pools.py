"""Managed warm pools: creation, reuse, matching, expiry, termination reasons, capacity.

Spec: semantics.md section 5 (and section 3: an Available pool counts in its
share's use).
"""

from __future__ import annotations

import pytest

from quartermaster import events as ev
from quartermaster.core.model import JobStatus, WarmPool
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"
DAY = 24 * 3600
R = ev.WarmPoolTerminationReason


def key(**fields: object) -> ev.WarmPoolKey:
    """The builder's default key (instance type and count), with `fields` changed."""
    return ev.WarmPoolKey(instance_type=UNIT, instance_count=1, **fields)  # type: ignore[arg-type]


def world(hosts: int = 1, strategy: str = "RESERVE") -> World:
    w = World().environment(ml_g5_xlarge=hosts).queue().hosts(hosts)
    w.share("QS1", hosts, strategy)
    return w


def pool(w: World, job_id: str) -> WarmPool:
    return w.state.pools[job_id]


def status(w: World, job_id: str) -> str:
    return str(w.state.pools[job_id].status)


def run_to_success(w: World, job_id: str, seconds: float = 10) -> tuple[str, ...]:
    """Dispatch (the job must be placed by this pass), run, succeed; returns its hosts."""
    w.pass_()
    assert job_id in w.dispatched(), f"{job_id} should have been dispatched"
    hosts = w.dispatched()[job_id]
    w.start(job_id)
    w.tick(seconds)
    w.succeed(job_id)
    w.pass_()
    return hosts


def keep_alive(w: World, job_id: str, seconds: int) -> ev.WarmPoolKeepAliveUpdated:
    """The request admission writes: the next pass decides the pool's new expiry."""
    return ev.WarmPoolKeepAliveUpdated(
        at=w.clock, job_id=job_id, keep_alive_seconds=seconds, pass_decides_expiry=True
    )


def terminated(w: World, job_id: str) -> list[ev.WarmPoolTerminated]:
    return [d for d in w.decisions if isinstance(d, ev.WarmPoolTerminated) and d.job_id == job_id]


# ---- a pool is born ---------------------------------------------------------------------


def test_a_keep_alive_job_that_succeeds_leaves_an_available_pool() -> None:
    # given
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    # when
    run_to_success(w, a)
    # then: the pool holds the host, charged to the share, for the keep-alive period
    p = pool(w, a)
    assert status(w, a) == "Available"
    assert p.hosts == ("h1",)
    assert w.state.hosts["h1"].holder == a
    assert w.state.use[("q", "QS1", UNIT)] == 1
    assert p.expires_at == pytest.approx(w.clock + 600)
    assert w.status(a) is JobStatus.SUCCEEDED


def test_a_job_without_keep_alive_leaves_no_pool() -> None:
    w = world()
    a = w.submit(a_job(name="a"))
    run_to_success(w, a)
    assert a not in w.state.pools
    assert w.state.hosts["h1"].holder is None


@pytest.mark.parametrize(
    ("failure_class", "leaves_pool"),
    [
        pytest.param(ev.FailureClass.ALGORITHM_ERROR, True, id="algorithm-error"),
        pytest.param(ev.FailureClass.CLIENT_ERROR, True, id="client-error"),
        pytest.param(ev.FailureClass.INFRASTRUCTURE_ERROR, False, id="infrastructure-error"),
    ],
)
def test_which_final_failures_leave_a_pool(
    failure_class: ev.FailureClass, leaves_pool: bool
) -> None:
    # given: a keep-alive job with a single attempt, running
    w = world(2)
    a = w.submit(a_job(name="a", keep_alive=600, attempts=1))
    w.pass_()
    w.start(a)
    # when
    w.fail(a, reason="boom", failure_class=failure_class)
    w.pass_()
    # then
    if leaves_pool:
        assert w.status(a) is JobStatus.FAILED
        assert status(w, a) == "Available"
        assert pool(w, a).hosts == ("h1",)
    else:  # the hosts may be harmed: no pool, and the job is placed again, cold
        assert a not in w.state.pools
        assert not any(isinstance(e, ev.WarmPoolAvailable) for e in w.log)
        assert w.dispatched() == {a: ("h1",)}
        dispatch = next(d for d in w.decisions if isinstance(d, ev.JobDispatched))
        assert dispatch.warm_pool is None


def test_a_keep_alive_job_terminated_after_it_started_leaves_a_pool() -> None:
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    w.pass_()
    w.start(a)
    # when: terminated and stopped
    w.terminate(a, "enough")
    w.confirm_stop(a)
    w.pass_()
    # then: "is stopped after its hosts started" keeps the hosts warm
    assert status(w, a) == "Available"


def test_a_keep_alive_job_terminated_before_it_started_leaves_no_pool() -> None:
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    w.pass_()
    w.terminate(a, "enough")
    w.confirm_stop(a)
    w.pass_()
    assert a not in w.state.pools
    assert w.state.hosts["h1"].holder is None


# ---- reuse --------------------------------------------------------------------------------


def test_a_matching_job_reuses_the_pool_on_the_same_hosts() -> None:
    # given: a's pool has been Available for 120 s
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    hosts = run_to_success(w, a)
    w.tick(120)
    # when: a matching job (other image and command are fine) arrives
    b = w.submit(a_job(name="b", keep_alive=300))
    w.pass_()
    # then
    assert w.dispatched() == {b: hosts}
    dispatch = next(d for d in w.decisions if isinstance(d, ev.JobDispatched))
    assert dispatch.warm_pool == a
    assert status(w, a) == "Reused"
    assert pool(w, a).reused_by_job == b
    assert pool(w, a).billable_seconds == 120
    assert status(w, b) == "InUse"
    assert w.state.use[("q", "QS1", UNIT)] == 1  # charged once, to the new job
    # when: b ends, its pool is Available for b's own keep-alive
    w.start(b)
    w.tick(50)
    w.succeed(b)
    w.pass_()
    assert status(w, b) == "Available"
    assert pool(w, b).hosts == hosts
    assert pool(w, b).expires_at == pytest.approx(w.clock + 300)
    assert pool(w, b).chain_id == pool(w, a).chain_id


def test_matching_jobs_take_a_pool_before_cold_hosts() -> None:
    # given: 3 hosts; x runs on h1, a's pool is on h2, h3 is cold and free
    w = world(3)
    x = w.submit(a_job(name="x"))
    a = w.submit(a_job(name="a", keep_alive=600))
    w.pass_()
    assert w.dispatched() == {x: ("h1",), a: ("h2",)}
    w.start(a).succeed(a)
    w.pass_()
    # when
    b = w.submit(a_job(name="b"))
    w.pass_()
    # then
    assert w.dispatched() == {b: ("h2",)}
    assert status(w, a) == "Reused"


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(key(role_arn="arn:aws:iam::1:role/other"), id="role_arn"),
        pytest.param(key(volume_size_in_gb=100), id="volume_size"),
        pytest.param(key(volume_kms_key_id="kms-2"), id="kms_key"),
        pytest.param(key(security_group_ids=("sg-9",)), id="security_groups"),
        pytest.param(key(subnets=("subnet-9",)), id="subnets"),
        pytest.param(key(network_isolation=True), id="network_isolation"),
        pytest.param(key(inter_container_traffic_encryption=True), id="encryption"),
        pytest.param(key(session_tag_chaining=True), id="session_tag_chaining"),
    ],
)
def test_a_non_matching_job_does_not_reuse_the_pool(other: ev.WarmPoolKey) -> None:
    # given: 2 hosts; a's pool on h1
    w = world(2)
    a = w.submit(a_job(name="a", keep_alive=600))
    run_to_success(w, a)
    # when: a job that differs in one matching field arrives
    b = w.submit(a_job(name="b", key=other))
    w.pass_()
    # then: it runs cold, the pool stays Available
    assert w.dispatched() == {b: ("h2",)}
    assert status(w, a) == "Available"


def test_security_groups_and_subnets_match_as_sets() -> None:
    w = world(2)
    first = key(security_group_ids=("sg-1", "sg-2"), subnets=("s-1", "s-2"))
    same = key(security_group_ids=("sg-2", "sg-1"), subnets=("s-2", "s-1"))
    a = w.submit(a_job(name="a", keep_alive=600, key=first))
    run_to_success(w, a)
    # when
    b = w.submit(a_job(name="b", key=same))
    w.pass_()
    # then
    assert w.dispatched() == {b: ("h1",)}
    assert status(w, a) == "Reused"


@pytest.mark.parametrize(
    ("keep_alive_a1", "keep_alive_a2", "used"),
    [
        pytest.param(600, 300, "a2", id="a2-expires-first"),
        pytest.param(300, 600, "a1", id="a1-expires-first"),
    ],
)
def test_among_matching_pools_the_one_expiring_first_is_used(
    keep_alive_a1: int, keep_alive_a2: int, used: str
) -> None:
    # given: two Available matching pools
    w = world(2)
    w.submit(a_job(name="a1", keep_alive=keep_alive_a1))
    w.submit(a_job(name="a2", keep_alive=keep_alive_a2))
    w.pass_()
    for j in ("a1", "a2"):
        w.start(j).succeed(j)
    w.pass_()
    assert status(w, "a1") == status(w, "a2") == "Available"
    used_hosts = pool(w, used).hosts
    # when
    b = w.submit(a_job(name="b"))
    w.pass_()
    # then
    assert w.dispatched() == {b: used_hosts}
    assert status(w, used) == "Reused"
    other = "a1" if used == "a2" else "a2"
    assert status(w, other) == "Available"


def test_a_matching_job_of_another_share_takes_the_pool_and_is_charged_for_it() -> None:
    # given: QS1 and QS2 (both RESERVE, own 1); QS1's job left a pool on h1
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 1, "RESERVE")
    w.share("QS2", 1, "RESERVE")
    a = w.submit(a_job(name="a", keep_alive=600))
    run_to_success(w, a)
    # when: a matching QS2 job arrives
    b = w.submit(a_job(name="b").in_share("QS2"))
    w.pass_()
    # then: it takes the pool; the units move from QS1 to QS2
    assert w.dispatched() == {b: ("h1",)}
    assert w.state.use[("q", "QS1", UNIT)] == 0
    assert w.state.use[("q", "QS2", UNIT)] == 1


# ---- the end of a pool --------------------------------------------------------------------


def test_an_unused_pool_expires_after_its_keep_alive() -> None:
    # given
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    run_to_success(w, a)
    # when: not yet
    w.tick(599)
    w.pass_()
    assert status(w, a) == "Available"
    # when: past the keep-alive
    w.tick(30)
    w.pass_()
    # then: billed for the 600 s it was Available, not for the late tick
    p = pool(w, a)
    assert status(w, a) == "Terminated"
    assert p.termination_reason is R.EXPIRED
    assert p.billable_seconds == 600
    assert w.state.hosts["h1"].holder is None
    assert w.state.use[("q", "QS1", UNIT)] == 0


def test_keep_alive_zero_terminates_the_pool_as_user_terminated() -> None:
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    run_to_success(w, a)
    w.tick(100)
    # when
    w.apply(keep_alive(w, a, 0))
    w.pass_()
    # then
    assert status(w, a) == "Terminated"
    assert pool(w, a).termination_reason is R.USER_TERMINATED
    assert w.state.hosts["h1"].holder is None


@pytest.mark.parametrize(
    ("new_keep_alive", "reason"),
    [
        pytest.param(0, R.USER_TERMINATED, id="keep-alive-0"),
        pytest.param(50, R.EXPIRED, id="keep-alive-shortened-below-elapsed"),
    ],
)
def test_a_pool_ended_by_a_keep_alive_update_bills_the_time_it_sat_available(
    new_keep_alive: int, reason: ev.WarmPoolTerminationReason
) -> None:
    # given: a pool Available for 100 s
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    run_to_success(w, a)
    w.tick(100)
    # when
    w.apply(keep_alive(w, a, new_keep_alive))
    w.pass_()
    # then: "wall-clock seconds the pool sat Available"
    assert pool(w, a).termination_reason is reason
    assert pool(w, a).billable_seconds == 100


def test_a_longer_keep_alive_extends_an_available_pool() -> None:
    w = world()
    a = w.submit(a_job(name="a", keep_alive=60))
    run_to_success(w, a)
    w.tick(30)
    w.apply(keep_alive(w, a, 600))
    w.tick(100)
    w.pass_()
    assert status(w, a) == "Available"


@pytest.mark.parametrize("seconds", [0, 50, 600, 3600])
def test_a_keep_alive_update_of_an_older_log_replays_as_it_was_recorded(seconds: int) -> None:
    """Logs written when the fold set the expiry itself: the upcast applies it at once,
    and ends where today's pass-decided path ends."""
    worlds = []
    for pass_decides in (False, True):
        w = world()
        a = w.submit(a_job(name="a", keep_alive=600))
        run_to_success(w, a)
        w.tick(100)
        w.apply(
            ev.WarmPoolKeepAliveUpdated(
                at=w.clock, job_id=a, keep_alive_seconds=seconds, pass_decides_expiry=pass_decides
            )
        )
        if not pass_decides:  # no pass needed: the fold applied it
            assert pool(w, a).expires_at == pytest.approx(
                max(w.clock, pool(w, a).available_since + seconds)  # type: ignore[operator]
            )
        w.pass_()
        worlds.append(w)
    old, new = (w.state.pools["a"] for w in worlds)
    assert (old.status, old.expires_at, old.termination_reason, old.billable_seconds) == (
        new.status,
        new.expires_at,
        new.termination_reason,
        new.billable_seconds,
    )


@pytest.mark.parametrize("event", [ev.HostLost, ev.HostDrained])
def test_a_pool_whose_host_goes_unhealthy_is_terminated(event: type[ev.Event]) -> None:
    # given
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    run_to_success(w, a)
    w.tick(40)
    # when
    w.apply(event(at=w.clock, host_id="h1"))  # type: ignore[call-arg]
    w.pass_()
    # then
    assert status(w, a) == "Terminated"
    assert pool(w, a).termination_reason is R.HOST_UNHEALTHY
    assert pool(w, a).billable_seconds == 40
    assert w.state.use[("q", "QS1", UNIT)] == 0


def test_the_chain_ends_after_28_days_across_reuses() -> None:
    # given: a's pool starts the chain; b reuses it and runs almost 28 days
    w = world()
    a = w.submit(a_job(name="a", keep_alive=3600))
    run_to_success(w, a)
    chain_start = pool(w, a).chain_started_at
    w.tick(60)
    b = w.submit(a_job(name="b", keep_alive=3600))
    w.pass_()
    assert w.dispatched() == {b: ("h1",)}
    w.start(b)
    w.tick(28 * DAY - 60 - 1800)
    w.succeed(b)
    w.pass_()
    # then: b's pool lives only until the chain's 28 days, not b's full keep-alive
    assert status(w, b) == "Available"
    assert pool(w, b).expires_at == pytest.approx(chain_start + 28 * DAY)
    # when: past the chain's maximum
    w.tick(1800 + 10)
    w.pass_()
    # then
    assert status(w, b) == "Terminated"
    assert pool(w, b).termination_reason is R.MAX_LIFETIME_REACHED
    assert 1799 <= pool(w, b).billable_seconds <= 1800  # whole seconds of ~1800


@pytest.mark.parametrize("ending", ["past-28-days", "infrastructure-failure"])
def test_an_in_use_pool_whose_job_ends_without_a_pool_is_terminated(ending: str) -> None:
    # given: b runs on a's pool
    w = world(2)
    a = w.submit(a_job(name="a", keep_alive=3600))
    run_to_success(w, a)
    b = w.submit(a_job(name="b", keep_alive=3600))
    w.pass_()
    assert status(w, b) == "InUse"
    w.start(b)
    # when: b ends in a way that keeps no hosts warm
    if ending == "past-28-days":
        w.tick(28 * DAY + 1)
        w.succeed(b)
    else:
        w.fail(b, reason="GPU lost", failure_class=ev.FailureClass.INFRASTRUCTURE_ERROR)
    w.pass_()
    # then: the pool is no longer InUse
    assert status(w, b) == "Terminated"


# ---- pools and capacity -------------------------------------------------------------------


def test_a_lender_reclaiming_terminates_the_borrowers_pool_before_preempting() -> None:
    # given: 2 units; QS1 (LAB, own 1) runs `keep`; its borrowed unit sits in a pool
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", 1, "LEND")
    keep = w.submit(a_job(name="keep"))
    a = w.submit(a_job(name="a", keep_alive=600))
    w.pass_()
    assert set(w.dispatched()) == {keep, a}
    w.start(keep).start(a)
    w.succeed(a)
    w.pass_()
    assert status(w, a) == "Available"
    pool_host = pool(w, a).hosts
    w.tick(20)
    # when: QS2 wants its unit back (a job that does not match the pool)
    q = w.submit(a_job(name="q", key=key(role_arn="arn:other")).in_share("QS2"))
    w.pass_()
    # then: the pool goes, nobody is preempted, q runs on the pool's host at once
    assert w.preempted() == []
    assert [d.reason for d in terminated(w, a)] == [R.CAPACITY_RECLAIMED]
    assert terminated(w, a)[0].billable_seconds == 20
    assert w.dispatched() == {q: pool_host}
    assert w.status(keep) is JobStatus.RUNNING


def test_a_shares_own_non_matching_job_terminates_the_pool_instead_of_waiting() -> None:
    # given: one unit; the share's pool holds it
    w = world()
    a = w.submit(a_job(name="a", keep_alive=600))
    run_to_success(w, a)
    # when: a job of the same share that does not match
    b = w.submit(a_job(name="b", key=key(role_arn="arn:other")))
    w.pass_()
    # then
    assert pool(w, a).termination_reason is R.CAPACITY_RECLAIMED
    assert w.dispatched() == {b: ("h1",)}


def test_pools_are_terminated_before_in_share_preemption() -> None:
    # given: 2 units, in-share preemption; `low` runs, a's pool holds the other unit
    w = world(2)
    w.share("QS1", 2, "RESERVE", preemption=True, updated=True)
    low = w.submit(a_job(name="low"))
    a = w.submit(a_job(name="a", keep_alive=600))
    w.pass_()
    w.start(low).start(a)
    w.succeed(a)
    w.pass_()
    # when: a high-priority non-matching job arrives
    hi = w.submit(a_job(name="hi", priority=5, key=key(role_arn="arn:other")))
    w.pass_()
    # then
    assert w.preempted() == []
    assert pool(w, a).termination_reason is R.CAPACITY_RECLAIMED
    assert hi in w.dispatched()


def test_the_pool_expiring_first_is_terminated_first() -> None:
    # given: two pools in a full share
    w = world(2)
    w.submit(a_job(name="long", keep_alive=900))
    w.submit(a_job(name="short", keep_alive=300))
    w.pass_()
    for j in ("long", "short"):
        w.start(j).succeed(j)
    w.pass_()
    # when: one non-matching job needs one unit
    b = w.submit(a_job(name="b", key=key(role_arn="arn:other")))
    w.pass_()
    # then
    assert status(w, "short") == "Terminated"
    assert status(w, "long") == "Available"
    assert b in w.dispatched()


def test_an_idle_pool_is_not_lent_to_a_borrower() -> None:
    # given: 2 units; QS2 (LEND, own 1) has a pool; QS1 (LAB, own 1) runs one job
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 1, "LEND_AND_BORROW")
    w.share("QS2", 1, "LEND")
    a = w.submit(a_job(name="a", keep_alive=600).in_share("QS2"))
    run_to_success(w, a)
    other = key(role_arn="arn:other")
    w.submit(a_job(name="own", key=other).in_share("QS1"))
    w.pass_()
    assert w.dispatched() == {"own": ("h2",)}
    # when: QS1 wants to borrow (a non-matching job)
    more = w.submit(a_job(name="more", key=other).in_share("QS1"))
    w.pass_()
    # then: the pool is QS2's use: nothing is lent, nothing terminated
    assert w.status(more) is JobStatus.RUNNABLE
    assert status(w, a) == "Available"
    assert w.decisions == []


def test_a_matching_job_may_not_take_a_pool_beyond_its_shares_limit() -> None:
    # given: QS1 (RESERVE, own 1) runs one job; QS2 (RESERVE, own 1) has a pool
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)
    w.share("QS1", 1, "RESERVE")
    w.share("QS2", 1, "RESERVE")
    a = w.submit(a_job(name="a", keep_alive=600).in_share("QS2"))
    run_to_success(w, a)
    w.submit(a_job(name="busy", key=key(role_arn="arn:other")).in_share("QS1"))
    w.pass_()
    assert w.dispatched() == {"busy": ("h2",)}
    # when: a matching QS1 job arrives; the pool's unit would exceed QS1's limit
    b = w.submit(a_job(name="b").in_share("QS1"))
    w.pass_()
    # then
    assert w.status(b) is JobStatus.RUNNABLE
    assert status(w, a) == "Available"


def test_keep_alive_zero_before_the_pool_opens_releases_the_hosts() -> None:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("A", 1)
    w.submit(a_job(name="a", share="A", keep_alive=60))
    w.pass_()
    w.start("a").succeed("a")
    assert w.job("a").retained  # ended; its pool opens on the next pass
    w.apply(keep_alive(w, "a", 0))
    w.pass_()
    assert "a" not in w.state.pools
    assert w.state.hosts["h1"].holder is None


def test_a_reserve_shares_pool_is_not_taken_when_its_idle_units_would_lose_their_hosts() -> None:
    """Found by the property test: taking a RESERVE share's pool is lending its units."""
    from quartermaster import events as ev
    from quartermaster.testing.builders import World, a_job

    w = World().environment(ml_g5_xlarge=4).queue().hosts(4)
    w.share("A", 1, "LEND_AND_BORROW")
    w.share("B", 2, "LEND")
    w.share("C", 1, "RESERVE")
    pool_key = ev.WarmPoolKey(role_arn="r-c", instance_type="ml.g5.xlarge")
    w.submit(a_job(name="c", share="C", keep_alive=60, key=pool_key))
    w.pass_()
    w.start("c").succeed("c")
    w.submit(a_job(name="a1", share="A"))  # other keys: cold hosts
    w.submit(a_job(name="b1", share="B"))
    w.pass_()
    w.lose_host("h4")  # capacity 3 < limits 4: B's idle unit has no host behind it
    w.pass_()
    assert w.state.pools["c"].status == "Available"
    w.submit(a_job(name="a2", share="A", key=pool_key))  # matches; B's idle unit looks lendable
    w.pass_()
    assert w.status("a2") == "RUNNABLE"
    assert w.state.pools["c"].status == "Available"
