"""The warm-pool service's timer arithmetic: pure, from folded state."""

from qm_warmpool.timers import next_due, tick_id
from quartermaster import events as ev
from quartermaster.testing.builders import World, a_job


def test_regular_ticks_sit_on_a_grid_shared_by_all_instances() -> None:
    w = World()
    assert next_due(w.state, now=101.2, tick_seconds=5) == 105.0
    assert tick_id(105.0) == tick_id(105.0000001)


def test_a_pool_expiry_is_due_before_the_next_regular_tick() -> None:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("A", 1)
    w.submit(a_job(name="a", share="A", keep_alive=2))
    w.pass_()
    w.start("a").succeed("a")
    w.pass_()
    pool = w.state.pools["a"]
    assert pool.expires_at == w.clock + 2
    assert next_due(w.state, now=w.clock, tick_seconds=60) == pool.expires_at
    w.apply(ev.ClockTicked(at=pool.expires_at))
    w.pass_()
    assert w.state.pools["a"].status == "Terminated"
    assert next_due(w.state, now=w.clock, tick_seconds=60) > pool.expires_at


def test_an_attempt_deadline_is_due() -> None:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("A", 1)
    w.submit(a_job(name="t", share="A", timeout=30))
    w.pass_()
    w.start("t")
    assert next_due(w.state, now=w.clock, tick_seconds=3600) == w.clock + 30
