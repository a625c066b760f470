"""Verify checks each recorded host loss against what it says it judged on.

Heartbeats are not in the log (a KV bucket holds them), so a loss records the
instant its host was last heard from; the verifier re-judges that claim with the
log's own signs of life and the heartbeat timeout the loss names.
"""

from __future__ import annotations

from quartermaster import events as ev
from quartermaster.audit import verify
from quartermaster.audit.logfile import from_batches
from quartermaster.core import PassPolicy, decide, fold
from quartermaster.testing.builders import World

TIMEOUT = 10.0


def platform() -> tuple[World, list[list[ev.Event]]]:
    w = World().environment(ml_g5_xlarge=2).queue().hosts(2)  # h1, h2 register at 1000
    w.share("A", 2, "RESERVE")
    return w, [list(w.log)]


def loss(host: str, at: float, last: float | None) -> ev.HostLost:
    return ev.HostLost(
        at=at,
        host_id=host,
        reason=f"no heartbeat for {TIMEOUT:g} s",
        last_heartbeat_at=last,
        heartbeat_timeout_seconds=TIMEOUT,
    )


def test_a_loss_judged_on_the_bucket_heartbeats_verifies() -> None:
    w, batches = platform()
    w.tick(20)  # 1020: h2 silent since its registration; h1 beat at 1015 in the bucket
    batches.append([ev.ClockTicked(at=w.clock)])
    policy = PassPolicy(heartbeat_timeout_seconds=TIMEOUT)
    decided = decide(w.state, policy, liveness={"h1": 1015.0})
    assert decided == [loss("h2", 1020.0, 1000.0)]
    for d in decided:
        fold(w.state, d)
    batches.append(decided)
    report = verify(from_batches(batches))
    assert report.ok, report.differences
    assert report.decision_messages == 1 and report.heartbeat_timeout_seconds == TIMEOUT


def test_a_loss_claiming_a_beat_within_the_timeout_is_a_difference() -> None:
    w, batches = platform()
    w.tick(20)
    batches.append([ev.ClockTicked(at=w.clock)])
    batches.append([loss("h1", 1020.0, 1015.0)])  # silent 5 s only: not lost
    report = verify(from_batches(batches))
    assert [d.recorded for d in report.differences] == [loss("h1", 1020.0, 1015.0)]
    assert report.differences[0].rederived is None


def test_a_loss_claiming_silence_from_before_the_registration_is_a_difference() -> None:
    w, batches = platform()
    w.tick(20)
    w.apply(ev.HostRegistered(at=w.clock, host_id="h1", instance_type="ml.g5.xlarge"))
    batches.append([ev.ClockTicked(at=1020.0), w.log[-1]])
    w.tick(5)
    batches.append([ev.ClockTicked(at=w.clock)])
    forged = loss("h1", 1025.0, 1000.0)  # h1 re-registered at 1020: alive 5 s ago
    batches.append([forged])
    report = verify(from_batches(batches))
    assert [d.recorded for d in report.differences] == [forged]


def test_an_older_loss_without_its_instant_is_judged_on_the_logged_heartbeats() -> None:
    w, batches = platform()
    w.tick(5)
    batches.append([ev.ClockTicked(at=w.clock), ev.HostHeartbeat(at=w.clock, host_id="h1")])
    fold(w.state, ev.HostHeartbeat(at=w.clock, host_id="h1"))
    w.tick(10)
    batches.append([ev.ClockTicked(at=w.clock)])
    old = ev.HostLost(at=w.clock, host_id="h2", reason=f"no heartbeat for {TIMEOUT:g} s")
    batches.append([old])
    report = verify(from_batches(batches), heartbeat_timeout_seconds=TIMEOUT)
    assert report.ok, report.differences
