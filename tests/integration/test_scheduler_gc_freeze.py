"""The scheduler keeps its folded state out of full GC walks (`eventlog.long_lived`):
once it has caught up with a real nats-server's log, its jobs' lists are frozen, and
what it folds later is frozen again after `every` more events."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from test_scheduler_service import append, running, seed, settings, submit, until

from qm_scheduler.service import Scheduler
from quartermaster.bus import JetStreamLog
from quartermaster.eventlog.long_lived import Refreezer


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the session collects as before


def _walked(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


async def test_caught_up_state_leaves_full_collections(jetstream_log: JetStreamLog) -> None:
    await seed(jetstream_log)
    await append(jetstream_log, submit("j1"), submit("j2"))
    scheduler = Scheduler(settings("s1"), jetstream_log)
    scheduler.refreezer = Refreezer(every=10_000)
    async with running(scheduler):
        await until(lambda: scheduler.refreezer.freezes == 1)
        assert scheduler.follower is not None
        await until(lambda: "j2" in scheduler.follower.state.jobs)
        job = scheduler.follower.state.jobs["j1"]
        assert not _walked(job.attempts)

        await append(jetstream_log, submit("j3", at=3.0))  # fewer than `every` events later
        await until(lambda: "j3" in scheduler.follower.state.jobs)
        await until(lambda: scheduler.passes >= 2)
        # A job holds nothing the collector tracks (`core.model`: tuples, gc=False
        # structs), frozen or not; no refreeze comes before `every` events.
        assert not _walked(scheduler.follower.state.jobs["j3"].attempts)
        assert scheduler.refreezer.freezes == 1
