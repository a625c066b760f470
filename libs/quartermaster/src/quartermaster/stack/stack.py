"""Starts and stops every part of Quartermaster in one process, in dependency order.

Embedded servers keep their data under `data_dir`, and host ids are stable, so
`qm up` on the same data dir resumes where it stopped: the log, the projection,
the jobs and the node agents' attempt records are all still there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

import asyncpg
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from quartermaster.bus import JetStreamLog
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.embedded.postgres import EmbeddedPostgres
from quartermaster.eventlog import LogFollower
from quartermaster.stack.settings import StackSettings
from quartermaster.store import Projector, ReadModel

log = logging.getLogger("qm.stack")


class Stack:
    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.data_dir = Path(settings.data_dir).resolve()
        self.port = 0
        self.nats_url = settings.nats_url or ""
        self.postgres_url = settings.postgres_url or ""
        self._nats: EmbeddedNats | None = None
        self._postgres: EmbeddedPostgres | None = None
        self._exit = contextlib.AsyncExitStack()
        self._tasks: list[asyncio.Task[None]] = []
        self.agents: list[object] = []
        self.scheduler: object | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> Stack:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    # ---- parts ------------------------------------------------------------
    async def _connect(self, name: str) -> JetStreamLog:
        event_log = await JetStreamLog.connect(
            self.nats_url,
            self.settings.stream,
            self.settings.subject_prefix,
            connection_name=f"qm-{name}",
        )
        self._exit.push_async_callback(event_log.close)
        return event_log

    def _spawn(self, name: str, coro: object) -> None:
        task = asyncio.create_task(coro, name=name)  # type: ignore[arg-type]
        task.add_done_callback(_report_crash)
        self._tasks.append(task)

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.nats_url:
            self._nats = EmbeddedNats(self.data_dir / "nats").start()
            self.nats_url = self._nats.url
        if not self.postgres_url:
            self._postgres = await asyncio.to_thread(
                EmbeddedPostgres(self.data_dir / "postgres").start
            )
            self.postgres_url = await self._postgres.create_database("quartermaster")
        await self._start_services()
        await self._wait_healthy()

    async def _start_services(self) -> None:
        from qm_admission.server import create_server, stop_server
        from qm_admission.settings import Settings as AdmissionSettings
        from qm_node_agent.agent import NodeAgent
        from qm_node_agent.settings import NodeSettings, RuntimeKind
        from qm_scheduler.service import Scheduler
        from qm_scheduler.settings import SchedulerSettings
        from qm_warmpool.service import WarmPoolService
        from qm_warmpool.settings import WarmPoolSettings

        s = self.settings
        scheduler = Scheduler(
            SchedulerSettings(
                instance_id="stack-scheduler",
                lease_ttl_seconds=3.0,
                heartbeat_timeout_seconds=s.heartbeat_timeout_seconds,
            ),
            await self._connect("scheduler"),
        )
        self.scheduler = scheduler
        self._spawn("scheduler", scheduler.run())
        warmpool = WarmPoolService(
            WarmPoolSettings(tick_seconds=s.tick_seconds), await self._connect("warmpool")
        )
        self._spawn("warmpool", warmpool.run())

        admission_log = await self._connect("admission")
        pool = await asyncpg.create_pool(self.postgres_url, min_size=1, max_size=16)
        self._exit.push_async_callback(pool.close)
        projector = Projector(pool, "qm")
        await projector.prepare()
        read_model = ReadModel(pool, "qm")
        self._exit.push_async_callback(read_model.close)
        follower = LogFollower(admission_log)
        settings = AdmissionSettings(grpc_host="127.0.0.1", grpc_port=s.grpc_port)
        server, self.port = await create_server(
            settings, admission_log, follower, read_model, projector
        )
        self._exit.push_async_callback(stop_server, server, 2.0)
        await follower.start()
        self._exit.push_async_callback(follower.stop)
        self._spawn("projector", projector.run(admission_log))

        agents_log = await self._connect("node-agents")
        for i in range(1, s.nodes + 1):
            host = f"node-{i}"
            agent = NodeAgent(
                NodeSettings(
                    host_id=host,
                    instance_type=s.instance_type,
                    data_dir=self.data_dir / "nodes" / host,
                    nats_url=self.nats_url,
                    stream=s.stream,
                    subject_prefix=s.subject_prefix,
                    runtime=RuntimeKind(s.runtime),
                    gpu_count=s.gpus_per_node,
                    heartbeat_seconds=s.heartbeat_seconds,
                    stop_grace_seconds=s.stop_grace_seconds,
                ),
                agents_log,
            )
            self.agents.append(agent)
            self._spawn(host, agent.run())

    async def _wait_healthy(self, timeout: float = 60.0) -> None:
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            deadline = asyncio.get_running_loop().time() + timeout
            while True:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                if asyncio.get_running_loop().time() > deadline:
                    raise TimeoutError(f"admission not healthy on {self.address}")
                await asyncio.sleep(0.2)
        agents = [a for a in self.agents if hasattr(a, "ready")]
        while not all(getattr(a, "ready", True) for a in agents):
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError("node agents did not register")
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        for agent in self.agents:
            stop = getattr(agent, "stop", None)
            if stop is not None:
                stop()
        for task in reversed(self._tasks):
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        await self._exit.aclose()
        if self._nats is not None:
            self._nats.stop()
            self._nats = None
        if self._postgres is not None:
            await asyncio.to_thread(self._postgres.stop)
            self._postgres = None


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped: %r", task.get_name(), task.exception(), exc_info=task.exception())
