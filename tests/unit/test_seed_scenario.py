"""The seed scenario of the core issue, exactly as written there."""

from quartermaster import events as ev
from quartermaster.core import Explainer, WaitCode
from quartermaster.core.model import JobStatus
from quartermaster.events import Rule
from quartermaster.testing.builders import World, a_job


def seed_world() -> World:
    w = World().environment(ml_g5_xlarge=3).queue().hosts(3)
    w.share("QS1", 1, "LEND_AND_BORROW", borrow_limit=200, preemption=True)
    w.share("QS2", 1, "LEND")
    w.share("QS3", 1, "RESERVE")
    return w


def test_seed_scenario() -> None:
    w = seed_world()
    for name, prio in (("high", 3), ("med", 2), ("low", 1)):
        w.submit(a_job(name=name, priority=prio).in_share("QS1"))
    w.pass_()
    assert w.dispatched() == {"high": ("h1",), "med": ("h2",)}
    assert [d.rule for d in w.decisions if isinstance(d, ev.JobDispatched)] == [
        Rule.OWN_QUOTA,
        Rule.BORROWED,
    ]
    assert w.status("low") is JobStatus.RUNNABLE
    low = Explainer(w.state).why("low")
    assert low is not None and (low.code, low.shares) == (WaitCode.RESERVE_HELD_BACK, ("QS3",))
    w.start("high").start("med")

    # 2. the LEND share's own job reclaims its lent unit, not QS3's idle one.
    w.submit(a_job(name="qs2_job_1", priority=1).in_share("QS2"))
    w.pass_()
    assert w.preempted() == ["med"]
    assert w.dispatched() == {}
    (reclaim,) = w.decisions
    assert isinstance(reclaim, ev.JobPreemptionRequested)
    assert (reclaim.rule, reclaim.for_job, reclaim.lender_share, reclaim.units_borrowed) == (
        Rule.RECLAIM,
        "qs2_job_1",
        "QS2",
        1,
    )
    waiting = Explainer(w.state).why("qs2_job_1")
    assert waiting is not None and (waiting.code, waiting.job_ids) == (
        WaitCode.WAITING_FOR_STOP,
        ("med",),
    )
    w.confirm_stop("med")
    w.pass_()
    assert w.status("med") is JobStatus.RUNNABLE
    assert w.dispatched() == {"qs2_job_1": ("h2",)}
    w.start("qs2_job_1")

    # 3. low jumps to priority 4: in-share preemption of high.
    w.set_priority("low", 4)
    w.pass_()
    assert w.preempted() == ["high"]
    (in_share,) = w.decisions
    assert isinstance(in_share, ev.JobPreemptionRequested)
    assert (in_share.rule, in_share.for_job, in_share.priority_gap) == (Rule.IN_SHARE, "low", 1)
    w.confirm_stop("high")
    w.pass_()
    assert w.dispatched() == {"low": ("h1",)}
    assert w.status("high") is JobStatus.RUNNABLE
    assert w.status("med") is JobStatus.RUNNABLE
    assert w.state.hosts["h3"].holder is None  # QS3's unit stays idle throughout
    explain = Explainer(w.state)
    high, med = explain.why("high"), explain.why("med")
    assert high is not None and high.code is WaitCode.RESERVE_HELD_BACK
    assert med is not None and (med.code, med.jobs_ahead) == (WaitCode.BEHIND_IN_SHARE, 1)
