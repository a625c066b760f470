"""Every decision names the rule that made it and that rule's inputs (spec section 9).

One row per rule: a small history, the decision it must produce, and the inputs
that decision must carry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from quartermaster import events as ev
from quartermaster.core import PassPolicy
from quartermaster.events import Rule
from quartermaster.testing.builders import World, a_job

DAY = 24 * 3600
R = ev.WarmPoolTerminationReason


def world(hosts: int = 2, **shares: tuple[int, str]) -> World:
    w = World().environment(ml_g5_xlarge=hosts).queue().hosts(hosts)
    for name, (limit, strategy) in shares.items():
        w.share(name, limit, strategy, preemption=True)
    return w


def running(w: World, name: str, share: str = "QS1", **fields: Any) -> None:
    w.submit(a_job(name=name, **fields).in_share(share))
    w.pass_()
    assert name in w.dispatched(), f"{name} should run"
    w.start(name)
    w.tick(10)


def pool_of(w: World, name: str, keep_alive: int = 600) -> None:
    running(w, name, keep_alive=keep_alive)
    w.succeed(name)
    w.pass_()


# ---- histories, each ending in the pass that makes the decision -------------------------


def own_quota(w: World) -> None:
    w.submit(a_job(name="j"))
    w.pass_()


def borrowed(w: World) -> None:
    running(w, "first")
    w.submit(a_job(name="j"))
    w.pass_()


def reclaim(w: World) -> None:
    running(w, "first")
    running(w, "borrower")
    w.submit(a_job(name="j").in_share("QS2"))
    w.pass_()


def limit_lowered(w: World) -> None:
    running(w, "x1", share="QS2")
    running(w, "x2", share="QS2")
    w.share("QS2", 1, "LEND", updated=True)
    w.share("QS1", 1, "LEND", updated=True)
    w.submit(a_job(name="j"))
    w.pass_()


def in_share(w: World) -> None:
    running(w, "low", priority=1)
    running(w, "low2", priority=2)
    w.submit(a_job(name="j", priority=5))
    w.pass_()


def pool_match(w: World) -> None:
    pool_of(w, "a")
    w.tick(30)
    w.submit(a_job(name="j"))
    w.pass_()


def pool_evicted(w: World) -> None:
    pool_of(w, "a")
    running(w, "b", key=ev.WarmPoolKey(role_arn="busy"))  # the other unit, not the pool
    w.submit(a_job(name="j", key=ev.WarmPoolKey(role_arn="other")))
    w.pass_()


def keep_alive(w: World) -> None:
    pool_of(w, "a", keep_alive=600)


def expired(w: World) -> None:
    pool_of(w, "a", keep_alive=60)
    w.tick(100)
    w.pass_()


def user_terminated(w: World) -> None:
    pool_of(w, "a")
    w.tick(20)
    w.apply(
        ev.WarmPoolKeepAliveUpdated(
            at=w.clock, job_id="a", keep_alive_seconds=0, pass_decides_expiry=True
        )
    )
    w.pass_()


def keep_alive_restated(w: World) -> None:
    pool_of(w, "a", keep_alive=60)
    w.tick(20)
    w.apply(
        ev.WarmPoolKeepAliveUpdated(
            at=w.clock, job_id="a", keep_alive_seconds=900, pass_decides_expiry=True
        )
    )
    w.pass_()


def chain_ended(w: World) -> None:
    pool_of(w, "a", keep_alive=3600)
    w.submit(a_job(name="b", keep_alive=3600))
    w.pass_()
    w.start("b")
    w.tick(28 * DAY + 5)
    w.succeed("b")
    w.pass_()


def host_unhealthy(w: World) -> None:
    pool_of(w, "a")
    w.tick(5)
    w.lose_host("h1")
    w.pass_()


def retried(w: World) -> None:
    running(w, "j", attempts=2)
    w.fail("j", reason="AlgorithmError: boom")
    w.pass_()


def retries_exhausted(w: World) -> None:
    running(w, "j", attempts=1)
    w.fail("j", reason="AlgorithmError: boom")
    w.pass_()


def exit_rule(w: World) -> None:
    rules = (
        ev.EvaluateOnExit(action="RETRY", on_exit_code="7"),
        ev.EvaluateOnExit(action="EXIT", on_status_reason="Algorithm*"),
    )
    running(w, "j", attempts=3, evaluate_on_exit=rules)
    w.fail("j", reason="AlgorithmError: boom")
    w.pass_()


def timed_out(w: World) -> None:
    running(w, "j", timeout=30)
    w.tick(30)
    w.pass_()


def capacity_failure(w: World) -> None:
    w.tick(31)
    w.pass_()


def misconfigured(w: World) -> None:
    w.submit(a_job(name="j", count=3))
    w.pass_()


Row = tuple[Callable[[World], None], type[ev.Event], dict[str, Any]]

ROWS: dict[Rule, Row] = {
    Rule.OWN_QUOTA: (own_quota, ev.JobDispatched, {"share_units": 1, "share_limit": 1}),
    Rule.BORROWED: (borrowed, ev.JobDispatched, {"share_units": 2, "share_limit": 1}),
    Rule.RECLAIM: (
        reclaim,
        ev.JobPreemptionRequested,
        {"job_id": "borrower", "for_job": "j", "lender_share": "QS2", "units_borrowed": 1},
    ),
    Rule.LIMIT_LOWERED: (
        limit_lowered,
        ev.JobPreemptionRequested,
        {"job_id": "x2", "for_job": "j", "lender_share": "QS1", "units_borrowed": 1},
    ),
    Rule.IN_SHARE: (
        in_share,
        ev.JobPreemptionRequested,
        {"job_id": "low", "for_job": "j", "priority_gap": 4, "units_borrowed": None},
    ),
    Rule.POOL_MATCH: (pool_match, ev.WarmPoolReused, {"job_id": "a", "reused_by_job": "j"}),
    Rule.POOL_EVICTED: (
        pool_evicted,
        ev.WarmPoolTerminated,
        {"job_id": "a", "for_job": "j", "reason": R.CAPACITY_RECLAIMED},
    ),
    Rule.KEEP_ALIVE: (keep_alive, ev.WarmPoolAvailable, {"keep_alive_seconds": 600}),
    Rule.EXPIRED: (expired, ev.WarmPoolTerminated, {"reason": R.EXPIRED, "billable_seconds": 60}),
    Rule.USER_TERMINATED: (
        user_terminated,
        ev.WarmPoolAvailable,
        {"keep_alive_seconds": 0},
    ),
    Rule.CHAIN_LIMIT: (
        chain_ended,
        ev.WarmPoolTerminated,
        {"job_id": "b", "reason": R.MAX_LIFETIME_REACHED},
    ),
    Rule.HOST_UNHEALTHY: (
        host_unhealthy,
        ev.WarmPoolTerminated,
        {"reason": R.HOST_UNHEALTHY, "billable_seconds": 5},
    ),
    Rule.RETRY: (retried, ev.JobRetried, {"attempt": 2, "attempts_allowed": 2}),
    Rule.RETRIES_EXHAUSTED: (
        retries_exhausted,
        ev.JobFinallyFailed,
        {"attempts_used": 1, "exit_rule_index": None},
    ),
    Rule.EXIT_RULE: (exit_rule, ev.JobFinallyFailed, {"attempts_used": 1, "exit_rule_index": 1}),
    Rule.TIMEOUT: (timed_out, ev.JobTimedOut, {"timeout_seconds": 30}),
    Rule.CAPACITY_FAILURE: (
        capacity_failure,
        ev.HostLost,
        {"host_id": "h1", "heartbeat_timeout_seconds": 30.0, "last_heartbeat_at": 1000.0},
    ),
    Rule.MISCONFIGURATION: (
        misconfigured,
        ev.JobStatusReasonSet,
        {"job_id": "j", "instances_needed": 3, "instances_allowed": 2},
    ),
}

WORLDS: dict[Rule, Callable[[], World]] = {
    Rule.RECLAIM: lambda: world(QS1=(1, "LEND_AND_BORROW"), QS2=(1, "LEND")),
    Rule.BORROWED: lambda: world(QS1=(1, "LEND_AND_BORROW"), QS2=(1, "LEND")),
    Rule.OWN_QUOTA: lambda: world(QS1=(1, "LEND_AND_BORROW"), QS2=(1, "LEND")),
    Rule.LIMIT_LOWERED: lambda: world(QS1=(0, "LEND"), QS2=(2, "LEND")),
    Rule.CAPACITY_FAILURE: lambda: (
        World(PassPolicy(heartbeat_timeout_seconds=30)).environment(ml_g5_xlarge=1).queue().hosts(1)
    ),
}


def test_every_rule_has_a_row() -> None:
    assert set(ROWS) == set(Rule)


@pytest.mark.parametrize("rule", list(ROWS), ids=str)
def test_a_decision_carries_its_rule_and_inputs(rule: Rule) -> None:
    # given
    w = WORLDS.get(rule, lambda: world(QS1=(2, "RESERVE")))()
    history, kind, inputs = ROWS[rule]
    # when
    history(w)
    # then: the last pass made a decision of that kind, by that rule, with those inputs
    made = [d for d in w.decisions if isinstance(d, kind) and getattr(d, "rule", None) is rule]
    assert made, f"no {kind.__name__} by {rule} in {w.decisions}"
    decision = made[-1]
    assert {name: getattr(decision, name) for name in inputs} == inputs
    # and the rule survives the log (msgpack) unchanged
    assert ev.decode(ev.encode(decision)) == decision


def test_a_restated_expiry_is_decided_by_the_pass_and_recorded() -> None:
    # given: a pool of 60 s, Available for 20 s
    w = world(QS1=(2, "RESERVE"))
    keep_alive_restated(w)
    # then: the pass restated the expiry; the fold only applied what it carries
    (restated,) = [d for d in w.decisions if isinstance(d, ev.WarmPoolAvailable)]
    assert restated.rule is Rule.KEEP_ALIVE and restated.keep_alive_seconds == 900
    pool = w.state.pools["a"]
    assert pool.expires_at == restated.expires_at == pytest.approx(pool.available_since + 900)
    assert pool.requested_keep_alive is None


def test_a_pool_chain_clamped_by_its_28_days_says_so() -> None:
    # given: b reuses a's pool and ends 28 days less 30 min after the chain started
    w = world(QS1=(2, "RESERVE"))
    pool_of(w, "a", keep_alive=3600)
    w.submit(a_job(name="b", keep_alive=3600))
    w.pass_()
    w.start("b")
    w.tick(28 * DAY - 1800 - 20)
    w.succeed("b")
    # when
    w.pass_()
    # then
    (opened,) = [d for d in w.decisions if isinstance(d, ev.WarmPoolAvailable)]
    assert opened.rule is Rule.CHAIN_LIMIT
    assert opened.expires_at == pytest.approx(opened.chain_started_at + 28 * DAY)


def test_upcast_old_records_name_their_rule() -> None:
    """Decisions recorded before `rule` existed decode with the rule their text names."""
    reclaimed = ev.from_json(
        b'{"type":"job.preemption_requested","at":1,"job_id":"v","attempt":1,'
        b'"reason":"Preempted: capacity reclaimed by quota share QS2","for_job":"j"}'
    )
    in_share_text = "Preempted: in-share preemption by higher-priority job hi (hi)"
    preempted = ev.JobPreemptionRequested(
        at=1, job_id="v", attempt=1, reason=in_share_text, for_job="hi"
    )
    ended = ev.from_json(
        b'{"type":"warm_pool.terminated","at":1,"job_id":"a","reason":"MAX_LIFETIME_REACHED",'
        b'"billable_seconds":3}'
    )
    assert isinstance(reclaimed, ev.JobPreemptionRequested)
    assert (reclaimed.rule, reclaimed.lender_share) == (Rule.RECLAIM, "QS2")
    assert reclaimed.units_borrowed is None  # not recorded then
    assert preempted.rule is Rule.IN_SHARE
    assert isinstance(ended, ev.WarmPoolTerminated) and ended.rule is Rule.CHAIN_LIMIT
