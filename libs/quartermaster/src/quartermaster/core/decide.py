"""`decide(state) -> decisions`: one deterministic scheduling pass (spec section 4).

A pass first settles what happened (housekeeping); only when nothing is left
to settle does it hand out capacity. `settle` runs passes and folds their
decisions until a pass decides nothing: what a user sees as "after the pass".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from quartermaster import events as ev
from quartermaster.core.allocation import UnitPass
from quartermaster.core.fold import fold
from quartermaster.core.hosts_picker import HostPicker
from quartermaster.core.housekeeping import settle_decisions
from quartermaster.core.incremental import PassMemo
from quartermaster.core.state import State
from quartermaster.events import State as Toggle


@dataclass(frozen=True)
class PassPolicy:
    """Knobs of the pass that are configuration, not state (recorded with the log)."""

    heartbeat_timeout_seconds: float | None = None


DEFAULT_POLICY = PassPolicy()


def decide(
    state: State,
    policy: PassPolicy = DEFAULT_POLICY,
    queues: frozenset[str] | None = None,
    hosts: bool = True,
    memo: PassMemo | None = None,
    liveness: Mapping[str, float] | None = None,
) -> list[ev.Event]:
    """The decisions for this instant of the log. Pure: the state is not changed.

    `queues` limits the pass to the job queues a scheduler instance leads
    (None: all); `hosts` says whether it also judges host liveness. With a `memo`
    (kept by the caller from pass to pass) the unit passes whose inputs did not
    change since they last decided nothing are skipped: the same decisions, sooner.
    `liveness` maps hosts to their newest heartbeat instant from outside the log
    (heartbeats are not logged): a host counts as silent from the newer of that and
    the log's own signs of life, and a loss records the instant it was judged on.
    """
    settled = settle_decisions(state, policy.heartbeat_timeout_seconds, queues, hosts, liveness)
    if settled:
        return settled
    out: list[ev.Event] = []
    allocate(state, out, queues, memo=memo)
    return out


def allocate(
    state: State,
    out: list[ev.Event],
    queues: frozenset[str] | None = None,
    explain: bool = False,
    memo: PassMemo | None = None,
) -> list[UnitPass]:
    """The allocation step: each (queue, unit) of an enabled environment, in name order,
    sharing one host picker (queues may share hosts). With `explain` each unit pass
    also records why its blocked heads wait (and none is skipped)."""
    passes = []
    picker = HostPicker(state)
    if explain:
        memo = None
    if memo is not None:
        memo.bind(state)
    for queue_name in sorted(state.queues):
        if queues is not None and queue_name not in queues:
            continue
        queue = state.queues[queue_name]
        env = state.environments.get(queue.environment)
        if env is None or env.state is Toggle.DISABLED:
            continue
        for unit in sorted(env.max_capacity):
            if memo is None:
                unit_pass = UnitPass(state, queue_name, unit, picker, out, {} if explain else None)
                unit_pass.run()
                passes.append(unit_pass)
                continue
            key = (queue_name, unit)
            inputs = memo.inputs(state, picker, queue_name, queue.environment, unit)
            if memo.quiet(key, inputs):
                continue
            before = len(out)
            UnitPass(state, queue_name, unit, picker, out).run()
            memo.record(key, inputs, decided=len(out) > before)
    return passes


def settle(
    state: State, policy: PassPolicy = DEFAULT_POLICY, max_rounds: int = 64
) -> list[ev.Event]:
    """Run passes, folding each one's decisions, until a pass decides nothing."""
    decided: list[ev.Event] = []
    for _ in range(max_rounds):
        decisions = decide(state, policy)
        if not decisions:
            return decided
        for decision in decisions:
            fold(state, decision)
        decided.extend(decisions)
    raise RuntimeError("scheduling pass did not settle")  # a bug: passes must converge
