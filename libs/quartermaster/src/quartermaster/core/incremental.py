"""A pass that costs what changed: skip the (queue, unit) passes that would decide nothing.

A unit pass that decided nothing decides nothing again while none of its inputs
changed. Its inputs are the queue's own (shares, jobs, pools, use: the fold
counts their changes in `State.queue_version`, see `core.changes`), the
configuration every queue reads (`State.config_version`), and what queues share:
the environment's use, its available warm pools, and the free hosts left to it by
the queues before it in this pass. The memo keeps, per (queue, unit), those inputs
as they were when it last decided nothing; equal inputs now mean the same empty
answer, so the pass goes on to the next queue. A unit pass that decided something
is always run again (its decisions change its inputs once folded, or they did not
apply and it must say them again).

Fewer free hosts: a quiet pass reads the free hosts only through "would this fit"
questions (`CapacityView.physical_free` and `lendable`, both non-decreasing in the
free hosts), and each answer "no" stays "no" with fewer. The one question whose
"yes" decides nothing is whether units already stopping will free enough for a
head (`UnitPass._waits_for_incoming`): with fewer free hosts it may say "no" and
the pass goes on to preempt. So a quiet pass of a queue with no units stopping in
that unit stays quiet with fewer free hosts, all else equal: that is what lets the
queues after the one that takes a freed host skip. Host ids do not take part: a
pass that places nothing reads how many hosts are free, never which.

The result is the full pass's, decision for decision
(tests/unit/core/test_incremental_pass.py compares them on random histories).
"""

from __future__ import annotations

from quartermaster.core.hosts_picker import HostPicker
from quartermaster.core.state import State

# (queue version, configuration version, environment use, pools version, free hosts)
Inputs = tuple[int, int, int, int, int]
# All but the free hosts; the free hosts; whether the pass stays quiet with fewer of
# them (nothing of the queue stopping in that unit).
Quiet = tuple[tuple[int, int, int, int], int, bool]
UnitKey = tuple[str, str]  # (queue, unit)
KEPT = 4  # quiet inputs kept per unit pass: a host that comes free and is taken again
# in the same pass leaves the later queues where they were, so the inputs recur


class PassMemo:
    """Per (queue, unit): the last inputs (a few) with which its pass decided nothing."""

    def __init__(self) -> None:
        self._state: State | None = None
        self._quiet: dict[UnitKey, list[Quiet]] = {}
        self.skipped = 0  # unit passes skipped, for benchmarks and logs
        self.run = 0

    def bind(self, state: State) -> None:
        """Forget everything when asked about another state (a restore, a fork)."""
        if state is not self._state:
            self._state = state
            self._quiet.clear()

    @staticmethod
    def inputs(state: State, picker: HostPicker, queue: str, env: str, unit: str) -> Inputs:
        env_unit = (env, unit)
        return (
            state.queue_version.get(queue, 0),
            state.config_version,
            state.env_use.get(env_unit, 0),
            state.pools_version.get(env_unit, 0),
            picker.count(env, unit),
        )

    def quiet(self, key: UnitKey, inputs: Inputs) -> bool:
        """Did this unit pass decide nothing with these inputs, or with these and more
        free hosts while nothing of its queue was stopping?"""
        kept = self._quiet.get(key)
        if kept:
            rest, free = inputs[:4], inputs[4]
            for seen_rest, seen_free, fewer_too in kept:
                if seen_rest == rest and (seen_free == free or (fewer_too and free < seen_free)):
                    self.skipped += 1
                    return True
        self.run += 1
        return False

    def record(self, key: UnitKey, inputs: Inputs, decided: bool) -> None:
        if decided:  # the queue's own inputs change when its decisions are folded
            self._quiet.pop(key, None)
            return
        kept = self._quiet.setdefault(key, [])
        if kept and kept[0][0][:2] != inputs[:2]:  # its own or the configuration changed
            kept.clear()
        kept.append((inputs[:4], inputs[4], not self._stopping(*key)))
        if len(kept) > KEPT:
            del kept[0]

    def _stopping(self, queue: str, unit: str) -> bool:
        """Are units of this queue and unit stopping (promised to waiting heads)?"""
        state = self._state
        if state is None:  # never bound: claim nothing beyond equal inputs
            return True
        stopping = state.stopping
        return any(stopping.get((queue, name, unit)) for name in state.queue_shares.get(queue, ()))
