"""Subscriptions whose messages are handled in the connection's read loop.

nats-py hands each message of a callback subscription to a task of the
subscription's own, through an `asyncio.Queue`: a loop turn between the socket
read and the callback, and on a busy loop everything else that is ready runs in
that turn first. Two hot paths have handlers that only note the message (a
publish ack resolving its future, a log delivery joining the reader's buffer),
so the turn carries nothing there: every append waits for an ack, and every
fold waits for a delivery, three of each on a job's way from submit to RUNNING
(docs/start-latency.md, fourth pass, counts the turns this saves).

`subscribe_inline` gives the subscription a queue whose `put_nowait` (the one
call nats-py makes for each message) runs the handler at once, in order, and
keeps nothing. The handler must be quick, must not block, and must not raise
(what it raises is logged and dropped: the read loop must go on).

`write_now` is the write side's counterpart: nats-py queues each publish for its
flusher task, which writes at the loop's next turn, behind whatever else is ready
then. An append waits for its ack, so that turn is part of every append's round
trip; writing at once lets the server store and ack while the loop does the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

log = logging.getLogger(__name__)

Handler = Callable[[Msg], None]


class _HandOver(asyncio.Queue[Msg]):
    """A queue that hands each message to `handler` as it is put, and stays empty
    (so a drain's `join()` and the pending counts see nothing left)."""

    def __init__(self, sub: Subscription, handler: Handler) -> None:
        super().__init__()
        self._sub = sub
        self._handler = handler

    def put_nowait(self, item: Msg) -> None:
        self._sub._pending_size -= len(item.data)  # nats-py added it before the put
        try:
            self._handler(item)
        except Exception:
            log.exception("handler of %s failed on a message; it is dropped", self._sub.subject)


async def subscribe_inline(nc: NatsClient, subject: str, handler: Handler) -> Subscription:
    """`nc.subscribe(subject)` whose messages go to `handler` in the read loop.

    Raises TypeError where the installed nats-py keeps a subscription's pending
    messages otherwise (tests/integration/test_inline_subscription.py fails first).
    """
    sub = await nc.subscribe(subject, pending_bytes_limit=-1)
    queued = getattr(sub, "_pending_queue", None)
    if not isinstance(queued, asyncio.Queue) or not hasattr(sub, "_pending_size"):
        await sub.unsubscribe()
        raise TypeError("this nats-py keeps pending messages in no asyncio.Queue")
    sub._pending_queue = _HandOver(sub, handler)
    while not queued.empty():  # came in before the hand-over (none in nats-py 2.x)
        sub._pending_queue.put_nowait(queued.get_nowait())
    return sub


def write_now(nc: NatsClient) -> None:
    """Write what `nc` has queued to its socket now, not at the flusher's next turn.
    Nothing happens where it cannot be written here (not connected, or a nats-py
    that keeps its queue otherwise): its flusher writes it then, as before. Order is
    kept: the queue goes out whole, and the flusher, when it runs, finds it empty."""
    pending = getattr(nc, "_pending", None)
    transport = getattr(nc, "_transport", None)
    if not pending or transport is None or not hasattr(nc, "_pending_data_size"):
        return
    if not nc.is_connected or nc.is_draining_pubs:
        return
    transport.writelines(pending)
    nc._pending = []
    nc._pending_data_size = 0
