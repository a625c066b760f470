"""Drain and undrain: a drain is the operator's and survives the agent registering again.

Spec: semantics.md (hosts): a drained host finishes what it runs and takes nothing new.
"""

from __future__ import annotations

import pytest

from quartermaster import events as ev
from quartermaster.core import HostStatus
from quartermaster.core.model import JobStatus
from quartermaster.testing.builders import World, a_job

UNIT = "ml.g5.xlarge"


def world() -> World:
    w = World().environment(ml_g5_xlarge=1).queue().hosts(1)
    w.share("QS1", 1, "RESERVE")
    return w


def register_again(w: World) -> None:
    w.tick()
    w.apply(ev.HostRegistered(at=w.clock, host_id="h1", instance_type=UNIT))


def test_a_drained_idle_host_stays_drained_when_its_agent_registers_again() -> None:
    # given
    w = world()
    w.apply(ev.HostDrained(at=w.clock, host_id="h1"))
    # when
    register_again(w)
    j = w.submit(a_job(name="j"))
    w.pass_()
    # then
    assert w.state.hosts["h1"].status is HostStatus.DRAINED
    assert w.status(j) is not JobStatus.SCHEDULED


def test_a_drained_busy_host_stays_drained_when_its_agent_registers_again() -> None:
    # given: h1 runs a job, then is drained
    w = world()
    j = w.submit(a_job(name="j"))
    w.pass_()
    assert w.status(j) is JobStatus.SCHEDULED
    w.apply(ev.HostDrained(at=w.clock, host_id="h1"))
    # when
    register_again(w)
    # then: it keeps its job, and stays drained
    host = w.state.hosts["h1"]
    assert host.status is HostStatus.DRAINED
    assert host.holder == j


@pytest.mark.parametrize("restart_first", [False, True])
def test_an_undrained_host_takes_new_work(restart_first: bool) -> None:
    # given
    w = world()
    w.apply(ev.HostDrained(at=w.clock, host_id="h1"))
    if restart_first:
        register_again(w)
    j = w.submit(a_job(name="j"))
    w.pass_()
    assert w.status(j) is not JobStatus.SCHEDULED
    # when
    w.apply(ev.HostUndrained(at=w.clock, host_id="h1"))
    w.pass_()
    # then
    assert w.state.hosts["h1"].status is HostStatus.HEALTHY
    assert w.status(j) is JobStatus.SCHEDULED


def test_undrain_keeps_a_lost_host_lost_and_it_registers_healthy() -> None:
    # given: drained, then lost
    w = world()
    w.apply(ev.HostDrained(at=w.clock, host_id="h1"))
    w.apply(ev.HostLost(at=w.clock, host_id="h1"))
    # when
    w.apply(ev.HostUndrained(at=w.clock, host_id="h1"))
    # then
    host = w.state.hosts["h1"]
    assert (host.status, host.drained) == (HostStatus.LOST, False)
    register_again(w)
    assert w.state.hosts["h1"].status is HostStatus.HEALTHY


def test_a_lost_drained_host_registers_drained() -> None:
    # given
    w = world()
    w.apply(ev.HostDrained(at=w.clock, host_id="h1"))
    w.apply(ev.HostLost(at=w.clock, host_id="h1"))
    # when
    register_again(w)
    # then
    assert w.state.hosts["h1"].status is HostStatus.DRAINED
