"""Why a RUNNABLE job waits after a pass (spec section 9): one row per wait reason.

Each row: a small world, the jobs submitted and the pass run, then the reason of
the job that waits, with its inputs and the line a person reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from quartermaster import events as ev
from quartermaster.core import Explainer, WaitCode, why_waiting
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"


def world(capacity: int, hosts: int | None = None, **shares: tuple[int, str, int]) -> World:
    w = (
        World()
        .environment(ml_g5_xlarge=capacity)
        .queue()
        .hosts(capacity if hosts is None else hosts)
    )
    for name, (limit, strategy, borrow_limit) in shares.items():
        w.share(name, limit, strategy, borrow_limit=borrow_limit)
    return w


def run(w: World, *names: str, share: str = "QS1", **fields: Any) -> None:
    for name in names:
        w.submit(a_job(name=name, **fields).in_share(share))
    w.pass_()
    for name in names:
        assert name in w.dispatched(), f"{name} should run"
        w.start(name)


# ---- one history per reason; each returns the waiting job --------------------------------


def share_at_limit() -> tuple[World, str]:
    w = world(3, QS1=(1, "RESERVE", -1), QS2=(2, "LEND", -1))
    run(w, "r1")
    w.submit(a_job(name="j"))
    w.pass_()
    return w, "j"


def borrow_limit_reached() -> tuple[World, str]:
    w = world(4, QS1=(1, "LEND_AND_BORROW", 100), QS2=(3, "LEND", -1))
    run(w, "b1", "b2")
    w.submit(a_job(name="j"))
    w.pass_()
    return w, "j"


def no_lendable_capacity() -> tuple[World, str]:
    w = world(2, QS1=(1, "LEND_AND_BORROW", -1), QS2=(1, "LEND", -1))
    run(w, "mine")
    run(w, "theirs", share="QS2")
    w.submit(a_job(name="j"))
    w.pass_()
    return w, "j"


def reserve_held_back() -> tuple[World, str]:
    w = world(2, QS1=(1, "LEND_AND_BORROW", -1), QS2=(1, "RESERVE", -1))
    run(w, "mine")
    w.submit(a_job(name="j"))
    w.pass_()
    return w, "j"


def behind_in_share() -> tuple[World, str]:
    w = world(1, QS1=(1, "RESERVE", -1))
    run(w, "r1")
    w.submit(a_job(name="first", priority=5))
    w.submit(a_job(name="second", priority=5))
    w.submit(a_job(name="j", priority=1))
    w.pass_()
    return w, "j"


def waiting_for_stop() -> tuple[World, str]:
    w = world(2, QS1=(1, "LEND_AND_BORROW", -1), QS2=(1, "LEND", -1))
    run(w, "mine")
    run(w, "borrowed")
    w.submit(a_job(name="j").in_share("QS2"))
    w.pass_()
    assert w.preempted() == ["borrowed"]
    return w, "j"


def gang_short_of_hosts() -> tuple[World, str]:
    w = world(4, hosts=3, QS1=(4, "RESERVE", -1))
    run(w, "r1")
    w.submit(a_job(name="j", count=3))
    w.pass_()
    return w, "j"


def misconfiguration() -> tuple[World, str]:
    w = world(2, QS1=(2, "RESERVE", -1))
    w.submit(a_job(name="j", count=3))
    w.pass_()
    return w, "j"


def environment_disabled() -> tuple[World, str]:
    w = world(2, QS1=(2, "RESERVE", -1))
    w.apply(
        ev.ServiceEnvironmentUpdated(
            at=w.clock,
            name="env",
            capacity_limits=(ev.CapacityLimit(UNIT, 2),),
            state=ev.State.DISABLED,
        )
    )
    w.submit(a_job(name="j"))
    w.pass_()
    return w, "j"


def awaiting_pass() -> tuple[World, str]:
    w = world(2, QS1=(2, "RESERVE", -1))
    w.submit(a_job(name="j"))  # no pass yet
    return w, "j"


ROWS: dict[WaitCode, tuple[Callable[[], tuple[World, str]], dict[str, Any], str]] = {
    WaitCode.SHARE_AT_LIMIT: (
        share_at_limit,
        {"needed": 1, "held": 1, "limit": 1},
        "quota share QS1 is at its limit (1 of 1 ml.g5.xlarge in use)",
    ),
    WaitCode.BORROW_LIMIT_REACHED: (
        borrow_limit_reached,
        {"needed": 1, "held": 2, "limit": 2},
        "borrowing blocked: quota share QS1 holds 2 ml.g5.xlarge and its borrowLimit allows 2",
    ),
    WaitCode.NO_LENDABLE_CAPACITY: (
        no_lendable_capacity,
        {"needed": 1, "held": 1, "free": 0},
        "borrowing blocked: quota share QS1 needs to borrow 1 ml.g5.xlarge, 0 lendable",
    ),
    WaitCode.RESERVE_HELD_BACK: (
        reserve_held_back,
        {"needed": 1, "free": 1, "shares": ("QS2",)},
        "RESERVE capacity held back: 1 ml.g5.xlarge free, 1 of them idle units of RESERVE "
        "quota share QS2",
    ),
    WaitCode.BEHIND_IN_SHARE: (
        behind_in_share,
        {"jobs_ahead": 2, "job_ids": ("first",)},
        "behind 2 higher-priority or older jobs of quota share QS1 (first: first)",
    ),
    WaitCode.WAITING_FOR_STOP: (
        waiting_for_stop,
        {"free": 1, "job_ids": ("borrowed",)},
        "waiting for 1 ml.g5.xlarge that 1 stopping job of quota share QS1 free",
    ),
    WaitCode.NOT_ENOUGH_FREE_HOSTS: (
        gang_short_of_hosts,
        {"needed": 3, "free": 2},
        "a gang of 3 needs 3 free ml.g5.xlarge hosts; 2 free",
    ),
    WaitCode.MISCONFIGURATION: (
        misconfiguration,
        {"needed": 3, "limit": 2},
        "MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE - needs 3 x ml.g5.xlarge",
    ),
    WaitCode.ENVIRONMENT_DISABLED: (
        environment_disabled,
        {"needed": 1},
        "service environment env is DISABLED",
    ),
    WaitCode.AWAITING_PASS: (
        awaiting_pass,
        {"needed": 1},
        "the next scheduling pass places it",
    ),
}


def test_every_wait_reason_has_a_row() -> None:
    assert set(ROWS) == set(WaitCode)


@pytest.mark.parametrize("code", list(ROWS), ids=str)
def test_a_waiting_job_says_why(code: WaitCode) -> None:
    history, inputs, text = ROWS[code]
    # given / when
    w, job_id = history()
    # then
    reason = why_waiting(w.state, job_id)
    assert reason is not None and reason.code is code, reason
    assert {name: getattr(reason, name) for name in inputs} == inputs
    assert text in reason.message
    if code is not WaitCode.MISCONFIGURATION:
        assert reason.message.startswith(f"WAITING:{code} - ")


def test_only_waiting_runnable_jobs_have_a_reason() -> None:
    w, _ = share_at_limit()
    assert why_waiting(w.state, "r1") is None  # it runs
    assert why_waiting(w.state, "nobody") is None


def test_a_smaller_job_behind_a_blocked_gang_waits_behind_it() -> None:
    """No backfill: the gang is the share's head, the single job behind it waits for it."""
    w, gang = gang_short_of_hosts()
    w.submit(a_job(name="single"))
    w.pass_()
    reason = why_waiting(w.state, "single")
    assert reason is not None
    assert (reason.code, reason.jobs_ahead, reason.job_ids) == (
        WaitCode.BEHIND_IN_SHARE,
        1,
        (gang,),
    )


def test_misconfigured_jobs_ahead_are_not_counted() -> None:
    w = world(1, QS1=(1, "RESERVE", -1))
    run(w, "r1")
    w.submit(a_job(name="huge", count=5, priority=9))
    w.submit(a_job(name="first", priority=5))
    w.submit(a_job(name="j", priority=1))
    w.pass_()
    reason = Explainer(w.state).why("j")
    assert reason is not None and (reason.code, reason.jobs_ahead) == (
        WaitCode.BEHIND_IN_SHARE,
        1,
    )
    head = Explainer(w.state).why("first")
    assert head is not None and head.code is WaitCode.SHARE_AT_LIMIT


def test_the_seed_scenario_waits_for_the_reasons_the_spec_gives() -> None:
    """QS1's third job waits because QS3's unit is held back (spec section 3)."""
    w = world(3, QS1=(1, "LEND_AND_BORROW", 200), QS2=(1, "LEND", -1), QS3=(1, "RESERVE", -1))
    for name, priority in (("high", 3), ("med", 2), ("low", 1)):
        w.submit(a_job(name=name, priority=priority))
    w.pass_()
    explain = Explainer(w.state)
    low = explain.why("low")
    assert low is not None and (low.code, low.shares) == (WaitCode.RESERVE_HELD_BACK, ("QS3",))
    assert explain.why("high") is None and explain.why("med") is None
