"""A connection to the node that leads the log's stream, for the services that append.

On a cluster, a client's append goes to the node it is connected to, which forwards it
over a route to the stream's leader; the leader replicates it and sends the ack back the
same way. A service connected to the leader saves those route hops on every append
(deployed_bench, 3 replicas, every service so placed: 66-73 NATS messages per job between
the nodes, against 73-81 before; the rest is mostly the stream's replication).
The consumers a service reads with sit on its node too (`bus.reader` places them), so
what they push crosses no route either, and is pushed as it is acked.

Where the leader is is asked once, at connect: a service stays where it is when the
leader moves later (each append then costs the route hops again, as before), and one
that cannot reach the leader by any of its URLs (a node down, or a single URL that a
load balancer spreads) keeps the connection it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlparse

from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from quartermaster.bus.errors import BusError
from quartermaster.bus.translate import NATS_FAILURES

log = logging.getLogger(__name__)

Opener = Callable[..., Awaitable[NatsClient]]  # (servers, **nats.connect options)


def server_name(nc: NatsClient) -> str | None:
    """The name of the node `nc` is connected to (from the node's INFO)."""
    info: dict[str, Any] = getattr(nc, "_server_info", None) or {}
    name = info.get("server_name")
    return name if isinstance(name, str) and name else None


async def stream_leader(js: JetStreamContext, stream: str) -> str | None:
    """The name of the node that leads `stream`; None where none does (an election) or
    the stream has no cluster (a single server)."""
    try:
        info = await js.stream_info(stream)
    except NATS_FAILURES:
        return None
    return info.cluster.leader if info.cluster is not None else None


async def connection_near_leader(
    current: NatsClient,
    js: JetStreamContext,
    stream: str,
    servers: list[str],
    open_on: Opener,
    timeout_s: float,
) -> NatsClient | None:
    """A new connection to the node that leads `stream`, tried by each of `servers` (its
    URL first, the others after it for reconnects); None where `current` is on it already,
    or no URL reaches it within `timeout_s` each. `js`: a context on `current`."""
    leader = await stream_leader(js, stream)
    here = server_name(current)
    if leader is None or leader == here:
        return None
    at = current.connected_url.netloc if current.connected_url is not None else None
    for i, url in enumerate(servers):
        if urlparse(url if "://" in url else f"nats://{url}").netloc == at:
            continue
        order = [url, *servers[:i], *servers[i + 1 :]]
        try:
            async with asyncio.timeout(timeout_s):
                nc = await open_on(order, dont_randomize=True)
        except (BusError, TimeoutError) as err:
            log.info("nats %s not reached (%s); trying the next", url, err)
            continue
        if server_name(nc) == leader:
            log.info("connected to %s, which leads stream %s (was %s)", leader, stream, here)
            return nc
        with contextlib.suppress(*NATS_FAILURES, TimeoutError):
            await asyncio.wait_for(nc.close(), timeout_s)
    log.info("stream %s is led by %s, which none of the URLs reached", stream, leader)
    return None
