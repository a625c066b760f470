"""Collectors whose samples are computed on the event loop that owns what they read.

`prometheus_client` serves `/metrics` from a thread of its own, while a
service's folded state and its log connection belong to its asyncio loop. A
`LoopCollector` hands its work to that loop and waits for the answer, so a
scrape never reads a state halfway through a fold.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Iterable

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT_SECONDS = 5.0


class LoopCollector(Collector):
    """Subclasses implement `families()` (run on the loop) and `describe()`.

    Create it on the loop it reads (inside a running coroutine); a scrape while
    that loop is stopped or busy past `SCRAPE_TIMEOUT_SECONDS` yields nothing.
    """

    def __init__(self, timeout: float = SCRAPE_TIMEOUT_SECONDS) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._timeout = timeout

    async def families(self) -> list[Metric]:
        raise NotImplementedError

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        if self._loop.is_closed():
            return []
        if threading.get_ident() == self._loop_thread:
            raise RuntimeError("a LoopCollector is scraped from its own loop: use families()")
        try:
            future = asyncio.run_coroutine_threadsafe(self.families(), self._loop)
        except RuntimeError:  # the loop closed meanwhile
            return []
        try:
            return future.result(self._timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            name = type(self).__name__
            log.warning("%s: no answer from the event loop in %.1f s", name, self._timeout)
            return []
        except Exception:  # one broken collector must not fail the whole scrape
            log.exception("%s failed", type(self).__name__)
            return []
