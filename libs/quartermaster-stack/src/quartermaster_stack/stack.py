"""Starts and stops every part of Quartermaster in one process, in dependency order.

Embedded servers keep their data under `data_dir`, and host ids are stable, so
`qm up` on the same data dir resumes where it stopped: the log, the projection,
the jobs and the node agents' attempt records are all still there. Each
service can also be restarted on its own (`restart("scheduler")`), which the
end-to-end tests use to prove that no restart loses or duplicates a job.

The services of the process share one fold of the log (`settings.shared_fold`):
the stack runs one `LogFollower` on a connection of its own, and the scheduler,
the warm pool, admission and the projector each get a share of it (their own
listeners and connection, one reader and one decode of every message); so do
the node agents, which then read no host feed. The
fold outlives the restart of any part; the projector keeps its own state, so
its tables still move only with its committed position.

With `settings.node_processes` (`qm up --node-processes`) each node agent runs as
`python -m qm_node_agent` in a process of its own instead (`node_process.py`), as
on hosts of their own: it reads its host feed, which the scheduler then relays.

The object store (SeaweedFS embedded under `data_dir/s3`, or `settings.s3_url`) starts
on a thread while NATS and Postgres start; its bucket is made and the role map
naming it (`data_dir/credentials/roles.json`) is written before admission and the
node agents start, which read it (`roles_file`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import msgspec
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from qm_admission.__main__ import AdmissionHealth
from qm_admission.server import aws_endpoint, create_server, stop_server
from qm_admission.settings import Settings as AdmissionSettings
from qm_node_agent.__main__ import health_checks as agent_checks
from qm_node_agent.agent import NodeAgent
from qm_node_agent.settings import NodeSettings, RuntimeKind
from qm_scheduler.__main__ import health_checks as scheduler_checks
from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from qm_warmpool.__main__ import health_checks as warmpool_checks
from qm_warmpool.service import WarmPoolService
from qm_warmpool.settings import WarmPoolSettings
from quartermaster import health
from quartermaster.audit.log_import import Imported, import_log
from quartermaster.auth.local import SERVER_NAMES, LocalCredentials
from quartermaster.bus import JetStreamLog
from quartermaster.bus.access import NatsCredentials
from quartermaster.cancelling import cancel_and_wait
from quartermaster.cli.aws_env import SDK_CONFIG_FILE, stack_roles_file
from quartermaster.cli.bus import AuditorAccess, StackFile, write_stack_file
from quartermaster.client.trainer import DEFAULT_ROLE
from quartermaster.core import State
from quartermaster.embedded.nats_auth import (
    BusLayout,
    Role,
    TlsFiles,
    render_config,
    service_users,
    user_name,
)
from quartermaster.embedded.nats_credentials import NatsPasswords
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.embedded.postgres import EmbeddedPostgres
from quartermaster.embedded.seaweedfs import EmbeddedSeaweedFS
from quartermaster.eventlog import LogFollower
from quartermaster.eventlog.bootstrap import bootstrap
from quartermaster.metrics import (
    LogLagCollector,
    MetricsServer,
    NodeMetrics,
    RpcMetrics,
    SchedulerMetrics,
    StateCollector,
)
from quartermaster.objectstore import ObjectStoreError, RoleMap, S3Access
from quartermaster.objectstore.store import ObjectStore
from quartermaster.store import Projector, ReadModel
from quartermaster.telemetry import logs
from quartermaster_stack import aws_api
from quartermaster_stack.node_process import NodeProcess
from quartermaster_stack.settings import StackSettings

log = logging.getLogger("qm.stack")

# The service name of each part (in log lines and spans); the others are node agents.
SERVICES = {
    "scheduler": "qm-scheduler",
    "warmpool": "qm-warmpool",
    "admission": "qm-admission",
    "projector": "qm-admission",
    "node": "qm-node-agent",
}

READY_MAX_LAG_SECONDS = 10.0  # as each service's own /readyz (its settings' default)


def stopped_part_health() -> health.Health:
    """What a part answers while `qm up` has it stopped."""
    checks = health.Health()
    checks.ready("running", lambda: health.failing("stopped"))
    return checks


Stopper = Callable[[], Awaitable[None]]


class Stack:
    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.data_dir = Path(settings.data_dir).resolve()
        self.port = settings.grpc_port
        self.nats_url = settings.nats_url or ""
        self.postgres_url = settings.postgres_url or ""
        self._nats: EmbeddedNats | None = None
        self._postgres: EmbeddedPostgres | None = None
        self._seaweedfs: EmbeddedSeaweedFS | None = None
        self.aws_port: int | None = None  # the AWS-compatible endpoint's, once serving
        self._key_mirror: asyncio.Task[None] | None = None
        self.roles_file: Path | None = None  # the role map admission and the agents read
        self.object_store: S3Access | None = None  # what the default role maps to
        self._pool: Any = None
        self._stoppers: dict[str, Stopper] = {}
        self.parts: dict[str, Any] = {}  # name -> the running service object
        self.credentials: LocalCredentials | None = None  # None: an insecure stack
        self.nats_passwords: NatsPasswords | None = None  # None: services connect anonymously
        # One registry for every service of the process; the metrics outlive part restarts.
        self.registry = CollectorRegistry()
        self.scheduler_metrics = SchedulerMetrics(self.registry)
        self.rpc_metrics = RpcMetrics(self.registry)
        self.node_metrics = NodeMetrics(self.registry)
        self.metrics_server: MetricsServer | None = None
        self.health: health.Health | None = None  # every part's checks, on the metrics port
        self._tasks: dict[str, asyncio.Task[None]] = {}  # part -> its running task
        self._stack_file: Path | None = None  # stack.json, while this stack runs
        self._admission_follower: LogFollower | None = None
        self._logs: dict[str, JetStreamLog] = {}  # part -> its open connection
        self._positions: dict[str, Callable[[], int]] = {}  # log consumer -> applied seq
        self.fold: LogFollower | None = None  # the process's one fold (None: each its own)
        self._fold_log: JetStreamLog | None = None
        self.restored: Imported | None = None  # what `settings.restore_from` brought back

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        return None if self.metrics_server is None else self.metrics_server.url

    def host_ids(self) -> list[str]:
        return [f"node-{i}" for i in range(1, self.settings.nodes + 1)]

    def node_data_dir(self, host_id: str) -> Path:
        return self.data_dir / "nodes" / host_id

    async def __aenter__(self) -> Stack:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    # ---- whole stack --------------------------------------------------------
    @property
    def credentials_dir(self) -> Path | None:
        return self.credentials.directory if self.credentials is not None else None

    @property
    def aws_url(self) -> str:
        """The AWS-compatible endpoint ("" when not served)."""
        if self.aws_port is None:
            return ""
        return f"{'https' if self.settings.secure else 'http'}://127.0.0.1:{self.aws_port}"

    @property
    def aws_keys_dir(self) -> Path | None:
        """Where the access keys are (`qm keys`): beside the other credentials when secure."""
        return self.data_dir / "credentials" if self.settings.secure else None

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.aws_keys_dir is not None:  # before the store starts: it accepts the key too
            await asyncio.to_thread(aws_api.ensure_admin_key, self.aws_keys_dir, time.time())
        # weed takes seconds to serve S3: it starts beside NATS and Postgres.
        object_store = asyncio.create_task(asyncio.to_thread(self._start_object_store))
        try:
            await self._start_log_and_database()
        except BaseException:
            await asyncio.wait([object_store])  # stop() then stops what it started
            if not object_store.cancelled():
                object_store.exception()  # the first error is the one raised
            raise
        await object_store
        if self.settings.restore_from is not None:  # before any service writes
            self.restored = await self._restore(Path(self.settings.restore_from))
        if self.settings.shared_fold:
            self._fold_log = await self._connect("fold", as_part="admission")
            self.fold = LogFollower(self._fold_log)
        await self.start_part("scheduler")
        await self.start_part("warmpool")
        await self.start_part("admission")
        if self.fold is not None:  # once admission's watch hub listens: it sees all
            await self.fold.start()
        for host in self.host_ids():
            await self.start_part(host)
        await self.wait_healthy()
        self._write_stack_file()

    def _write_stack_file(self) -> None:
        """`<data-dir>/stack.json`: where `qm log export`, `qm audit`, `qm usage` (and `qm
        top`, `qm explain`) find this stack, and the read-only auditor user they use."""
        stack = StackFile(
            grpc_address=self.address,
            nats_url=self.nats_url,
            stream=self.settings.stream,
            subject_prefix=self.settings.subject_prefix,
            auditor=self._access(Role.AUDITOR),
            admin=self._access(Role.ADMIN),
            aws_url=self.aws_url,
            store_takes_api_keys=self._seaweedfs is not None and self.aws_keys_dir is not None,
        )
        self._stack_file = write_stack_file(self.data_dir, stack)

    def _access(self, role: Role) -> AuditorAccess:
        """How a `qm` command logs in as `role`: its password file and client certificate."""
        if self.nats_passwords is None:
            return AuditorAccess()
        user = user_name(role)
        creds = self._with_client_cert(NatsCredentials(user=user), role.value)
        return AuditorAccess(
            user=user,
            password_file=self._relative(self.nats_passwords.password_file(user)),
            tls_ca=self._relative(creds.tls_ca),
            tls_cert=self._relative(creds.tls_cert),
            tls_key=self._relative(creds.tls_key),
        )

    async def _restore(self, path: Path) -> Imported:
        """`qm up --restore`: the exported log into this stack's empty stream, as the admin
        user, before any service starts (so none folds, decides or registers a host on a
        half-restored log). A stream that holds anything is refused."""
        admin = NatsCredentials()
        if self.nats_passwords is not None:
            admin = self.nats_passwords.credentials(user_name(Role.ADMIN))
            admin = self._with_client_cert(admin, "admin")
        async with await JetStreamLog.connect(
            self.nats_url,
            self.settings.stream,
            self.settings.subject_prefix,
            connection_name="qm-restore",
            credentials=admin,
            create_stream=self.nats_passwords is None,  # else made by the bootstrap
        ) as event_log:
            return await import_log(event_log, path, self.nats_layout().snapshot_bucket)

    def _relative(self, path: Path | str) -> str:
        """A path under the data dir as the stack file keeps it ("" stays "")."""
        return str(Path(path).resolve().relative_to(self.data_dir)) if path else ""

    async def _start_log_and_database(self) -> None:
        if self.settings.secure:
            self.credentials = await asyncio.to_thread(
                LocalCredentials.ensure,
                self.data_dir / "credentials",
                dt.datetime.now(dt.UTC),
            )
        self._serve_metrics()
        await self._start_nats()
        if not self.postgres_url:
            postgres = EmbeddedPostgres(self.data_dir / "postgres")
            self._postgres = await asyncio.to_thread(postgres.start)
            self.postgres_url = await postgres.create_database("quartermaster")
        self._pool = await asyncpg.create_pool(self.postgres_url, min_size=1, max_size=16)

    def _start_object_store(self) -> None:
        """The store the default execution role maps to, its bucket, and the role map
        (blocking: run on a thread). An operator's `roles_file` is used as it is."""
        s = self.settings
        if s.roles_file is not None:
            self.roles_file = Path(s.roles_file).resolve()
            self.object_store = RoleMap.load(self.roles_file).default_access
            return
        if not s.object_store:
            return
        if s.s3_url:
            access = S3Access(
                endpoint_url=s.s3_url,
                access_key_id=s.s3_access_key_id,
                secret_access_key=s.s3_secret_access_key,
                region=s.s3_region,
            )
        else:
            self._seaweedfs = EmbeddedSeaweedFS(
                self.data_dir / "s3", self.data_dir / "credentials", region=s.s3_region
            )
            if self.aws_keys_dir is not None:
                self._seaweedfs.set_extra_identities(
                    aws_api.store_identities(self.aws_keys_dir, s.s3_bucket)
                )
            access = self._seaweedfs.start().access
        try:
            ObjectStore(access).create_bucket(s.s3_bucket)
        except ObjectStoreError as err:
            if self._seaweedfs is not None:
                raise
            log.warning("bucket %s not created at %s: %s", s.s3_bucket, s.s3_url, err)
        self.roles_file = stack_roles_file(self.data_dir)
        self.roles_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        RoleMap(roles={DEFAULT_ROLE: access}, default_role=DEFAULT_ROLE).save(self.roles_file)
        aws_api.write_sdk_config(self.roles_file.parent / SDK_CONFIG_FILE, s.s3_bucket)
        self.object_store = access

    async def stop(self) -> None:
        if self._stack_file is not None:  # says where a *running* stack is
            self._stack_file.unlink(missing_ok=True)
            self._stack_file = None
        if self._key_mirror is not None:
            self._key_mirror.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._key_mirror
            self._key_mirror = None
        for name in reversed(list(self._stoppers)):
            await self.stop_part(name)
        if self.fold is not None:
            await self.fold.stop()
            self.fold = None
        if self._fold_log is not None:
            self._logs.pop("fold", None)
            await self._fold_log.close()
            self._fold_log = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        if self._nats is not None:
            self._nats.stop()
            self._nats = None
        servers = [server for server in (self._postgres, self._seaweedfs) if server is not None]
        self._postgres = self._seaweedfs = None
        await asyncio.gather(*(asyncio.to_thread(server.stop) for server in servers))
        if self.metrics_server is not None:
            self.metrics_server.close()
            self.metrics_server = None

    # ---- metrics ------------------------------------------------------------
    def _serve_metrics(self) -> None:
        """`/metrics` of every part on one port: state gauges from the scheduler's fold."""
        if self.settings.metrics_port is None or self.metrics_server is not None:
            return

        self.registry.register(StateCollector(self._scheduler_state))
        self.registry.register(LogLagCollector(self._last_seq, self._applied))
        self.health = health.Health()
        self.metrics_server = MetricsServer(
            self.registry, self.settings.metrics_port, self.settings.metrics_host, self.health
        )

    def _include_health(self, name: str) -> None:
        """The part's own checks (those its service serves when run alone) on `/livez` and
        `/readyz` of the stack's metrics port."""
        if self.health is None:
            return
        part = self.parts.get(name)
        lag = READY_MAX_LAG_SECONDS
        follower = self._admission_follower
        if isinstance(part, Scheduler):
            checks = scheduler_checks(part, lag)
        elif isinstance(part, WarmPoolService):
            checks = warmpool_checks(part, lag)
        elif name == "admission" and follower is not None:
            admission = AdmissionHealth(
                AdmissionSettings(ready_max_lag_seconds=lag),
                self._logs["admission"],
                follower,
                self.parts["projector"],
                self._pool,
            )
            admission.projecting = self._tasks.get("projector")
            checks = admission.health
        elif isinstance(part, NodeAgent):
            checks = agent_checks(part, self._node_settings(name))
        else:
            return  # an agent in a process of its own answers for itself
        self.health.include(name, checks)

    def _stopped_health(self, name: str) -> None:
        """A part stopped while the stack runs: the stack is not ready without it."""
        if self.health is not None:
            self.health.include(name, stopped_part_health())

    async def _last_seq(self) -> int:
        for event_log in list(self._logs.values()):
            return await event_log.last_seq()
        return 0

    def _applied(self) -> dict[str, int]:
        return {name: position() for name, position in self._positions.items()}

    async def restart(self, name: str) -> None:
        await self.stop_part(name)
        await self.start_part(name)
        await self.wait_healthy()

    # ---- parts --------------------------------------------------------------
    async def start_part(self, name: str) -> None:
        starters = {
            "scheduler": self._scheduler,
            "warmpool": self._warmpool,
            "admission": self._admission,
        }
        starter = starters.get(name)
        self._stoppers[name] = await (starter() if starter else self._agent(name))
        self._include_health(name)

    async def stop_part(self, name: str) -> None:
        stopper = self._stoppers.pop(name, None)
        self.parts.pop(name, None)
        if name == "admission":
            self.parts.pop("projector", None)
        self._logs.pop(name, None)
        self._positions.pop(name, None)
        self._positions.pop("projector" if name == "admission" else name, None)
        if stopper is not None:
            self._stopped_health(name)
            await stopper()

    # ---- the bus ------------------------------------------------------------
    def nats_layout(self) -> BusLayout:
        buckets = SchedulerSettings()
        return BusLayout(
            stream=self.settings.stream,
            subject_prefix=self.settings.subject_prefix,
            lease_bucket=buckets.lease_bucket,
            snapshot_bucket=buckets.snapshot_bucket,
        )

    async def _start_nats(self) -> None:
        """Embed a nats-server unless given one; secure: one NATS user per service.

        The users' passwords live in `<data-dir>/credentials/nats/`. A given server is
        used with them only if that directory exists (its operator started the server
        with the config rendered there); otherwise services connect anonymously.
        """
        directory = self.data_dir / "credentials" / "nats"
        if self.settings.secure and (not self.nats_url or directory.is_dir()):
            self.nats_passwords = NatsPasswords(directory)
        if not self.nats_url:
            config = None
            tls = self._nats_server_tls()
            if self.nats_passwords is not None:
                users = service_users(self.nats_passwords.password, self.host_ids())
                text = render_config(users, self.nats_layout(), tls=tls)
                config = await asyncio.to_thread(self.nats_passwords.write_server_config, text)
            self._nats = EmbeddedNats(
                self.data_dir / "nats", config_file=config, tls=tls is not None
            ).start()
            self.nats_url = self._nats.url
        if self.nats_passwords is None:
            if self.settings.secure:
                log.warning("NATS at %s is used without credentials", self.nats_url)
            return
        admin = self._with_client_cert(
            self.nats_passwords.credentials(user_name(Role.ADMIN)), "admin"
        )
        await bootstrap(self.nats_url, self.nats_layout(), admin)

    def nats_credentials(self, part: str) -> NatsCredentials:
        """Who part `part` (a service, or a host id) is on the bus."""
        if self.nats_passwords is None:
            return NatsCredentials()
        roles = {"scheduler": Role.SCHEDULER, "warmpool": Role.WARMPOOL}
        role = roles.get(part, Role.ADMISSION if part == "admission" else Role.NODE)
        name = user_name(role, part if role is Role.NODE else None)
        return self._with_client_cert(self.nats_passwords.credentials(name), part)

    def _nats_server_tls(self) -> TlsFiles | None:
        """Mutual TLS on the embedded server of a secured stack: every service, node agent
        and the bootstrap show a certificate of the stack's CA (and their NATS password)."""
        if self.credentials is None or self.nats_passwords is None:
            return None
        cert, key = self.credentials.service_cert("nats-server", _now(), SERVER_NAMES)
        return TlsFiles(
            cert_file=str(cert), key_file=str(key), ca_file=str(self.credentials.ca), verify=True
        )

    def _with_client_cert(self, creds: NatsCredentials, part: str) -> NatsCredentials:
        if self.credentials is None or self._nats is None or not self._nats.tls:
            return creds
        cert, key = self.credentials.service_cert(f"nats-{part}", _now())
        return msgspec.structs.replace(
            creds, tls_ca=str(self.credentials.ca), tls_cert=str(cert), tls_key=str(key)
        )

    def _bus_fields(self, part: str) -> dict[str, Any]:
        """The BusSettings fields of a part's settings: where the log is, who it is there."""
        creds = self.nats_credentials(part)
        return {
            "nats_url": self.nats_url,
            "stream": self.settings.stream,
            "subject_prefix": self.settings.subject_prefix,
            "nats_user": creds.user,
            "nats_password": creds.password,
            "nats_tls_ca": creds.tls_ca,
            "nats_tls_cert": creds.tls_cert,
            "nats_tls_key": creds.tls_key,
        }

    async def _connect(self, part: str, as_part: str | None = None) -> JetStreamLog:
        """Part `part`'s connection, as `as_part` on the bus (default: itself)."""
        self._logs[part] = event_log = await JetStreamLog.connect(
            self.nats_url,
            self.settings.stream,
            self.settings.subject_prefix,
            connection_name=f"qm-{part}",
            credentials=self.nats_credentials(as_part or part),
            create_stream=self.nats_passwords is None,  # else made by the bootstrap
        )
        return event_log

    def _task(
        self,
        name: str,
        coro: Coroutine[Any, Any, None],
        event_log: JetStreamLog,
        before: Callable[[], None] | None = None,
    ) -> Stopper:
        service = SERVICES.get(name)
        scoped = logs.scoped(coro, service or SERVICES["node"], None if service else name)
        task = asyncio.create_task(scoped, name=name)
        task.add_done_callback(_report_crash)
        self._tasks[name] = task

        async def stop() -> None:
            if before is not None:
                before()
                with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(task), 5)
            await cancel_and_wait(task)  # again if a library wait dropped the cancel
            await event_log.close()

        return stop

    async def _scheduler(self) -> Stopper:
        settings = SchedulerSettings(
            instance_id="stack-scheduler",
            lease_ttl_seconds=3.0,
            lease_renew_seconds=1.0,  # the one scheduler: no standby waits to take over
            heartbeat_timeout_seconds=self.settings.heartbeat_timeout_seconds,
            # agents on a share of the fold read no feed; agents in processes of their own do
            relay_host_feeds=self.fold is None or self.settings.node_processes,
            **self._bus_fields("scheduler"),
        )
        event_log = await self._connect("scheduler")
        scheduler = Scheduler(
            settings, event_log, self.scheduler_metrics, shared=self._share(event_log)
        )
        self.parts["scheduler"] = scheduler
        self._positions["scheduler"] = lambda: (
            0 if scheduler.follower is None else scheduler.follower.seq
        )
        return self._task("scheduler", scheduler.run(), event_log)

    async def _warmpool(self) -> Stopper:
        event_log = await self._connect("warmpool")
        settings = WarmPoolSettings(
            tick_seconds=self.settings.tick_seconds, **self._bus_fields("warmpool")
        )
        service = WarmPoolService(settings, event_log, self._share(event_log))
        self.parts["warmpool"] = service
        self._positions["warmpool"] = lambda: service.follower.seq
        return self._task("warmpool", service.run(), event_log)

    async def _admission(self) -> Stopper:
        event_log = await self._connect("admission")
        projector = Projector(
            self._pool,
            self.settings.pg_schema,
            interval=self.settings.projection_interval_seconds,
        )
        await projector.prepare()
        read_model = ReadModel(self._pool, self.settings.pg_schema)
        follower = self._share(event_log) or LogFollower(event_log)
        self._admission_follower = follower
        settings = AdmissionSettings(
            grpc_host="127.0.0.1",
            grpc_port=self.port,
            pg_schema=self.settings.pg_schema,
            require_command=self.settings.runtime == "process",
            roles_file=str(self.roles_file or ""),
            aws_port=self.settings.aws_port if self.aws_port is None else self.aws_port,
            aws_keys_dir=str(self.aws_keys_dir or ""),
            **self._admission_security(),
            **self._bus_fields("admission"),
        )
        server, self.port = await create_server(
            settings, event_log, follower, read_model, projector, self.rpc_metrics
        )
        endpoint = aws_endpoint(server)
        self.aws_port = None if endpoint is None else endpoint.port
        seaweedfs = self._seaweedfs
        if seaweedfs is not None and self.aws_keys_dir is not None and self._key_mirror is None:
            self._key_mirror = asyncio.create_task(
                aws_api.mirror_keys(
                    self.aws_keys_dir, self.settings.s3_bucket, seaweedfs.set_extra_identities
                )
            )
        self._positions["admission"] = lambda: follower.seq
        self._positions["projector"] = lambda: projector.seq
        await follower.start()
        # The projection is handed each message by admission's fold (the process's, or
        # admission's own without a shared fold, as the deployed admission does).
        projecting = self._task(
            "projector", projector.run(event_log, feed=follower.share), event_log
        )
        self.parts["admission"] = server
        self.parts["projector"] = projector

        async def stop() -> None:
            await stop_server(server, 1.0)
            await follower.stop()
            await read_model.close()
            await projecting()

        return stop

    def _node_settings(self, host: str) -> NodeSettings:
        s = self.settings
        return NodeSettings(
            host_id=host,
            instance_type=s.instance_type,
            data_dir=self.node_data_dir(host),
            nats_url=self.nats_url,
            stream=s.stream,
            subject_prefix=s.subject_prefix,
            runtime=RuntimeKind(s.runtime),
            job_path=s.job_path,
            registry=s.registry,
            gpu_count=s.gpus_per_node,
            heartbeat_seconds=s.heartbeat_seconds,
            stop_grace_seconds=s.stop_grace_seconds,
            nats_credentials=self.nats_credentials(host),
            roles_file=str(self.roles_file or ""),
        )

    async def _agent(self, host: str) -> Stopper:
        settings = self._node_settings(host)
        if self.settings.node_processes:
            return self._agent_process(host, settings)
        event_log = await self._connect(host)
        # On a share of the fold, not its host feed: no relay hop before a launch.
        shared = None if self.fold is None else self.fold.share()
        agent = NodeAgent(settings, event_log, metrics=self.node_metrics, shared=shared)
        self.parts[host] = agent
        self._positions[host] = lambda: agent.log_position
        return self._task(host, agent.run(), event_log, before=agent.stop)

    def _agent_process(self, host: str, settings: NodeSettings) -> Stopper:
        """`python -m qm_node_agent` for `host`, as on a host of its own: its own loop,
        connection and host feed (the scheduler relays it), settings by environment."""
        since = time.time()

        def registered() -> bool:  # by this process: HostRegistered stamped since its spawn
            state = self._scheduler_state()
            known = None if state is None else state.hosts.get(host)
            return known is not None and known.last_heartbeat >= since

        agent = NodeProcess.spawn(settings, registered)
        self.parts[host] = agent
        return lambda: agent.stop(self.settings.stop_grace_seconds + 10)

    def _scheduler_state(self) -> State | None:
        """The scheduler's folded state (the shared fold's, when there is one)."""
        scheduler = self.parts.get("scheduler")
        follower = None if scheduler is None else scheduler.follower
        return None if follower is None else follower.state

    def _share(self, event_log: JetStreamLog) -> LogFollower | None:
        """A share of the process's fold on `event_log` (None: no shared fold)."""
        return None if self.fold is None else self.fold.share(event_log)

    def _admission_security(self) -> dict[str, Any]:
        creds = self.credentials
        if creds is None:
            return {"insecure": True}
        return {
            "page_token_secret": creds.page_token_key.read_text().strip(),
            "token_public_key_file": str(creds.verify_key),
            "tls_cert_file": str(creds.server_cert),
            "tls_key_file": str(creds.server_key),
        }

    def _channel(self) -> grpc.aio.Channel:
        if self.credentials is None:
            return grpc.aio.insecure_channel(self.address)
        tls = grpc.ssl_channel_credentials(root_certificates=self.credentials.ca.read_bytes())
        return grpc.aio.secure_channel(self.address, tls)

    async def wait_healthy(self, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with self._channel() as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
                    if reply.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                if loop.time() > deadline:
                    raise TimeoutError(f"admission not healthy on {self.address}")
                await asyncio.sleep(0.1)
        for host in self.host_ids():
            agent = self.parts.get(host)
            while agent is not None and not agent.ready:
                if loop.time() > deadline:
                    raise TimeoutError(f"node agent {host} did not register")
                await asyncio.sleep(0.05)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped: %r", task.get_name(), task.exception(), exc_info=task.exception())
