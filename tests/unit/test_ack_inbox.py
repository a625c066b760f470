"""AckInbox's bookkeeping of publishes waiting for their acks, without a server: a
reply takes its token out at once, and futures that end without one (timed out,
cancelled) are swept out, so the table stays bounded without a callback per append.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from nats.aio.msg import Msg

from quartermaster.bus.puback import SWEEP_AT, AckInbox, PubAck


class SilentConnection:
    """Takes publishes and answers nothing (a server gone quiet)."""

    def __init__(self) -> None:
        self.published: list[str] = []

    def new_inbox(self) -> str:
        return "_INBOX.test"

    async def publish(self, subject: str, data: bytes, reply: str = "", **_: Any) -> None:
        self.published.append(reply)


class Subscribed:
    async def unsubscribe(self) -> None:
        pass


def started(nc: SilentConnection) -> AckInbox:
    inbox = AckInbox(nc)  # type: ignore[arg-type]
    inbox._sub = Subscribed()  # type: ignore[assignment]  # as if subscribed: no start()
    return inbox


def ack(reply: str, seq: int) -> Msg:
    return Msg(_client=None, subject=reply, data=json.dumps({"seq": seq}).encode())  # type: ignore[arg-type]


async def test_a_reply_resolves_its_future_and_takes_its_token_out() -> None:
    nc = SilentConnection()
    inbox = started(nc)
    future = await inbox.publish("t.jobs", b"x", None)
    inbox._on_reply(ack(nc.published[0], 7))
    assert future.result() == PubAck(seq=7, duplicate=False)
    assert inbox._waiting == {}
    inbox._on_reply(ack(nc.published[0], 7))  # a duplicate reply: nothing waits for it
    assert inbox._waiting == {}


async def test_futures_that_end_without_a_reply_are_swept_out() -> None:
    # given: a server that never answers, and callers that give up on every publish
    nc = SilentConnection()
    inbox = started(nc)
    for _ in range(5 * SWEEP_AT):
        future = await inbox.publish("t.jobs", b"x", None)
        future.cancel()
    # when: one more caller still waits
    waiting = await inbox.publish("t.jobs", b"x", None)
    # then: the table holds at most one sweep's worth of ended futures, and the one waiting
    assert len(inbox._waiting) <= SWEEP_AT
    assert any(f is waiting for _, f in inbox._waiting.values())
    inbox._on_reply(ack(nc.published[-1], 1))
    assert waiting.result().seq == 1
    await inbox.stop()
    assert inbox._waiting == {}
    assert not asyncio.all_tasks() - {asyncio.current_task()}
