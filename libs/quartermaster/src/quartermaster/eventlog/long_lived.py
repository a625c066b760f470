"""Keep a follower's folded state out of the cyclic garbage collector's walks.

The folded state lives as long as the process, has no reference cycles, and is
large. Jobs held three lists the collector tracked (attempts, ended hosts, recent
preemptions): a million jobs were about three million tracked objects, and a full
collection walked them all (about 0.7 s on the 2-core machine). They are tuples
now (e12e3df) and a job holds nothing tracked, but the state's own dicts, sets
and index structures still are, and so is whatever a process keeps beside it
(the scheduler's memo, admission's watch history). CPython runs
one whenever a quarter more objects reached the oldest generation, and it lands in
whatever runs then, a pass included. `gc.freeze()` moves every tracked object to a
generation no collection walks; refcounting still frees them when they are dropped
(a job that leaves the state), only a cycle among frozen objects is never freed.

So a process that folds the log freezes once it has caught up (after a full
collection, so nothing that is garbage then is frozen), and again each time it
folded `REFREEZE_EVENTS` more, between passes: a full collection then walks only
what came since the last freeze. What stays unfreed is what was alive at a freeze
and later became cyclic garbage: a few transient objects each time, at most once
per `REFREEZE_EVENTS` events.
"""

from __future__ import annotations

import gc

REFREEZE_EVENTS = 100_000  # bounds what a full collection walks since the last freeze


def freeze_long_lived() -> None:
    """Collect what is garbage now, then leave every survivor out of later collections."""
    gc.collect()
    gc.freeze()


class Refreezer:
    """Freezes again once `every` more events were folded (asked between passes)."""

    def __init__(self, every: int = REFREEZE_EVENTS) -> None:
        self.every = every
        self._frozen_at: int | None = None
        self.freezes = 0

    def caught_up(self, seq: int) -> None:
        """The follower folded the log up to `seq` at start: freeze what it built."""
        freeze_long_lived()
        self._frozen_at = seq
        self.freezes += 1

    def tend(self, seq: int) -> bool:
        """Freeze if `every` events were folded since the last freeze; say whether."""
        if self._frozen_at is not None and seq - self._frozen_at < self.every:
            return False
        self.caught_up(seq)
        return True
