"""Batch replays run without the cyclic garbage collector.

A replay only builds (the folded state lives to the end) and makes no cyclic
garbage (a 100k-event verification leaves none), yet full collections walk the
growing state again and again: about a third of a verification's time.
Refcounting still frees everything that is dropped.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
