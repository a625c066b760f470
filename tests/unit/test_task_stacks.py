"""The hang report names each pending task and the await it is stuck in."""

from __future__ import annotations

import asyncio
import io

from quartermaster.testing.task_stacks import report_tasks


async def stuck_on_an_event(event: asyncio.Event) -> None:
    await asyncio.shield(inner(event))


async def inner(event: asyncio.Event) -> None:
    await event.wait()


async def test_the_report_shows_each_pending_task_where_it_waits() -> None:
    # given: a task waiting on an event that is never set
    event = asyncio.Event()
    task = asyncio.create_task(stuck_on_an_event(event), name="the-stuck-one")
    for _ in range(3):  # both tasks started and waiting
        await asyncio.sleep(0)
    out = io.StringIO()
    try:
        # when
        count = report_tasks("a test", out)
    finally:
        task.cancel()
    # then: the task, its coroutine and the line it waits on are in the report
    report = out.getvalue()
    assert count >= 2  # it and this test's own task
    assert "a test: still running" in report
    assert "the-stuck-one" in report
    assert "stuck_on_an_event" in report
    assert "await asyncio.shield(inner(event))" in report  # the task's own frame
    # and, through the shielded task's own entry, the await it is stuck in
    assert "await event.wait()" in report
    assert "in wait: await fut" in report  # asyncio.Event.wait, down to its future
