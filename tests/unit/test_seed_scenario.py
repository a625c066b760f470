"""The seed scenario of the core issue, exactly as written there."""

from quartermaster.core.model import JobStatus
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
    assert w.status("low") is JobStatus.RUNNABLE
    w.start("high").start("med")

    # 2. the LEND share's own job reclaims its lent unit, not QS3's idle one.
    w.submit(a_job(name="qs2_job_1", priority=1).in_share("QS2"))
    w.pass_()
    assert w.preempted() == ["med"]
    assert w.dispatched() == {}
    w.confirm_stop("med")
    w.pass_()
    assert w.status("med") is JobStatus.RUNNABLE
    assert w.dispatched() == {"qs2_job_1": ("h2",)}
    w.start("qs2_job_1")

    # 3. low jumps to priority 4: in-share preemption of high.
    w.set_priority("low", 4)
    w.pass_()
    assert w.preempted() == ["high"]
    w.confirm_stop("high")
    w.pass_()
    assert w.dispatched() == {"low": ("h1",)}
    assert w.status("high") is JobStatus.RUNNABLE
    assert w.status("med") is JobStatus.RUNNABLE
    assert w.state.hosts["h3"].holder is None  # QS3's unit stays idle throughout
