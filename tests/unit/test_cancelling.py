"""`cancel_and_wait` stops a task that drops a cancellation, as a 3.11 `wait_for` can."""

from __future__ import annotations

import asyncio
import contextlib

from quartermaster.cancelling import cancel_and_wait

GUARD = 10.0


async def drops_the_first_cancel(event: asyncio.Event) -> None:
    # dropped, as a 3.11 wait_for does when the inner wait completes at the same time
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(60)
    await event.wait()  # never set: only a second cancel ends this


async def test_a_task_that_drops_a_cancel_is_cancelled_again_until_it_ends() -> None:
    # given: a task that carries on after one cancel
    task = asyncio.create_task(drops_the_first_cancel(asyncio.Event()))
    await asyncio.sleep(0)
    # when
    await asyncio.wait_for(cancel_and_wait(task, again_after=0.01), GUARD)
    # then
    assert task.cancelled()


async def test_a_task_that_fails_as_it_stops_does_not_fail_the_caller() -> None:
    async def fails_on_cancel() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            raise RuntimeError("cleanup failed") from None

    task = asyncio.create_task(fails_on_cancel())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task), GUARD)
    assert task.done() and isinstance(task.exception(), RuntimeError)


async def test_an_ended_task_is_left_as_it_is() -> None:
    async def quick() -> int:
        return 7

    task = asyncio.create_task(quick())
    await task
    await cancel_and_wait(task)
    assert task.result() == 7
