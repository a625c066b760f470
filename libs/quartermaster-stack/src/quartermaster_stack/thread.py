"""The whole stack on a thread of its own, for synchronous end-to-end tests.

Tests talk to it through the blocking gRPC client, exactly like a user; the
stack's asyncio loop runs beside them, and `restart(part)` restarts one
service inside that loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from quartermaster_stack.settings import StackSettings
from quartermaster_stack.stack import Stack

T = TypeVar("T")


class StackThread:
    def __init__(self, settings: StackSettings, start_timeout: float = 120.0) -> None:
        self.stack = Stack(settings)
        self._timeout = start_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="qm-stack", daemon=True)

    @property
    def address(self) -> str:
        return self.stack.address

    @property
    def thread_id(self) -> int | None:
        """The identifier of the thread the stack's loop runs on (None before start)."""
        return self._thread.ident

    @property
    def credentials_dir(self) -> Path | None:
        """Where this stack keeps `ca.pem` and `admin.token` (None: insecure)."""
        return self.stack.credentials_dir

    def _main(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            async with self.stack:
                self._ready.set()
                await self._stop.wait()
        except BaseException as err:  # surfaced to the test thread
            self._error = err
            self._ready.set()

    def __enter__(self) -> StackThread:
        self._thread.start()
        if not self._ready.wait(self._timeout):
            raise TimeoutError("the stack did not start")
        if self._error is not None:
            raise RuntimeError(f"the stack did not start: {self._error!r}") from self._error
        return self

    def __exit__(self, *_: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=60)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        assert self._loop is not None
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    def restart(self, part: str) -> None:
        self.run(self.stack.restart(part), timeout=90)

    def stop_part(self, part: str) -> None:
        self.run(self.stack.stop_part(part))

    def start_part(self, part: str) -> None:
        self.run(self.stack.start_part(part))
