"""`qm up` folds the log once: scheduler, warm pool, admission and projector read one fold.

Counted on the real nats-server: the consumers on the log stream while jobs run are
the stack's one reader with a shared fold, one per service without it. With a shared
fold the node agents read it too, so no host views are relayed to a feed.
"""

from __future__ import annotations

import nats.js.errors
from conftest import StackFactory, client_for
from scenario import setup_queue, shell, status, until

from quartermaster.bus.feed import feed_stream
from quartermaster.client import TrainingQueue
from quartermaster_stack.thread import StackThread


def log_consumers(stack: StackThread) -> int:
    async def count() -> int:
        event_log = stack.stack._logs["admission"]
        info = await event_log.js.stream_info(stack.stack.settings.stream)
        return int(info.state.consumer_count)

    return stack.run(count())


def feed_messages(stack: StackThread) -> int:
    """Host views on the relay's feed stream (0 if the stream was never made)."""

    async def count() -> int:
        event_log = stack.stack._logs["admission"]
        try:
            info = await event_log.js.stream_info(feed_stream(stack.stack.settings.stream))
        except nats.js.errors.NotFoundError:
            return 0
        return int(info.state.messages)

    return stack.run(count())


def run_jobs(queue: TrainingQueue, names: list[str]) -> None:
    jobs = [queue.submit(shell("true"), job_name=name, quota_share_name="A") for name in names]
    c = queue.client
    until("all succeeded", lambda: all(status(c, j.job_id) == "SUCCEEDED" for j in jobs))


def test_the_services_of_qm_up_share_one_fold(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=1)
    queue = setup_queue(client_for(stack), 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    run_jobs(queue, ["j0", "j1"])
    assert len(queue.client.list_jobs("q")) == 2  # the projection (fed by the fold) has both
    parts, fold = stack.stack.parts, stack.stack.fold
    assert fold is not None
    assert parts["scheduler"].follower.state is fold.state
    assert parts["warmpool"].follower.state is fold.state
    assert log_consumers(stack) == 1
    stack.restart("scheduler")  # the fold outlives it; the new scheduler shares it too
    scheduler = stack.stack.parts["scheduler"]
    until("the scheduler started", lambda: scheduler.follower is not None)
    assert scheduler.follower.state is fold.state
    run_jobs(queue, ["after"])
    assert log_consumers(stack) == 1
    assert feed_messages(stack) == 0  # the agents read the fold: nothing relayed


def test_without_a_shared_fold_each_service_reads_the_log(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=1, shared_fold=False)
    queue = setup_queue(client_for(stack), 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    run_jobs(queue, ["j0", "j1"])
    assert stack.stack.fold is None
    # The scheduler and admission each have a consumer (admission's fold hands each
    # message on to its projection); the warm pool reads in batches, by direct gets.
    assert log_consumers(stack) == 2
    warmpool = stack.stack.parts["warmpool"]
    assert warmpool.follower.paced and warmpool.follower.seq > 0
    assert len(queue.client.list_jobs("q")) == 2  # the projection, fed by admission's fold
    assert feed_messages(stack) > 0  # the agents read their host feeds
