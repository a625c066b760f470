"""The node agent: registers its host, follows the log, and makes the host do what it says.

After every folded batch the agent reconciles its host against the folded
state (the core fold is the only truth): it launches the attempt that holds
the host, stops parts whose attempt is being stopped, confirms stops of parts
it never launched, forgets finished attempts and deletes warm pool caches
that no pool keeps any more. Everything it does is reported on
`<prefix>.reports.<host>` with idempotent msg ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import shutil
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from qm_node_agent.attempt import AttemptRunner
from qm_node_agent.contract.checkpoints import Round
from qm_node_agent.contract.host import interface_of, resolve
from qm_node_agent.contract.stage import reset_chain_tree
from qm_node_agent.desired import attempt_on, cache_chains, is_current, should_run, stop_reason
from qm_node_agent.desired import stop_wanted as stop_wanted_for
from qm_node_agent.errors import LaunchError, PermanentNodeAgentError, SettingsError
from qm_node_agent.gpus import Gpu, detect_gpus
from qm_node_agent.joblogs import LogKeeper, serve_logs
from qm_node_agent.launch import LaunchSpec, build_spec
from qm_node_agent.layout import Layout, container_name, safe_name
from qm_node_agent.records import AttemptRecord, AttemptStore
from qm_node_agent.reporter import Reporter
from qm_node_agent.runtime import DockerRuntime, JobRuntime, ProcessRuntime
from qm_node_agent.settings import PREFIX, NodeSettings, RuntimeKind
from qm_node_agent.spares import Spares
from qm_node_agent.viewmark import ViewMark
from quartermaster import events as ev
from quartermaster.bus import BusError, JetStreamLog
from quartermaster.bus.liveness import Beat, send_beat
from quartermaster.cancelling import cancel_and_wait
from quartermaster.core import HostStatus, Job, State
from quartermaster.eventlog import LogFollower
from quartermaster.eventlog.host_feed import touched
from quartermaster.eventlog.host_reader import HostFeedFollower
from quartermaster.eventlog.process import manages_stream
from quartermaster.metrics.attempts import NodeMetrics, StartObserver
from quartermaster.objectstore import RoleMap

log = logging.getLogger(__name__)

AttemptKey = tuple[str, int]
LIVE_LOG_TRIM_SECONDS = 5.0  # how often running attempts' logs are held to the cap
# The most a stopping agent waits for ended parts to be removed: well inside the 10 s
# that compose gives a stopping container before SIGKILL (Kubernetes: 30 s).
REMOVALS_WAIT_S = 5.0


def load_roles(path: str) -> RoleMap:
    """The execution roles' store credentials (none when no file is set)."""
    if not path:
        return RoleMap()
    try:
        return RoleMap.load(path)
    except ValueError as err:
        raise SettingsError(f"{PREFIX}ROLES_FILE: {err}") from err


def make_runtime(settings: NodeSettings, spares: Spares) -> JobRuntime:
    if settings.runtime is RuntimeKind.DOCKER:
        return DockerRuntime(
            settings.docker_binary,
            data_dir=settings.data_dir,
            registry=settings.registry,
            host_id=settings.host_id,
        )
    return ProcessRuntime(spares, settings.job_path)


@dataclasses.dataclass
class Chores:
    """File work of one tidy-up, done in one worker thread (`NodeAgent._do`): each
    chore's name (for a failure's log) and body, and the folders being deleted."""

    todo: list[tuple[str, Callable[[], None]]] = dataclasses.field(default_factory=list)
    deleting: list[Path] = dataclasses.field(default_factory=list)


class NodeAgent:
    """One host's agent. `await agent.run()` until `agent.stop()`, or `async with agent:`.

    `event_log`: an open log to use (the caller closes it); None connects to
    `settings.nats_url` and closes the connection on the way out. `gpus`:
    the host's GPUs when known (tests); None detects them unless
    `settings.gpu_count` is set. `shared`: a share of a fold its process runs
    anyway (`LogFollower.share`, e.g. `qm up`'s): the agent reads the log through
    it, not its host feed (no relay hop, no read of its own). Stopping leaves
    running jobs alone: the next agent on this host re-adopts them.
    """

    def __init__(
        self,
        settings: NodeSettings,
        event_log: JetStreamLog | None = None,
        *,
        runtime: JobRuntime | None = None,
        gpus: Sequence[Gpu] | None = None,
        clock: Callable[[], float] = time.time,
        metrics: NodeMetrics | None = None,
        shared: LogFollower | None = None,
    ) -> None:
        self.settings = settings
        self._shared = shared
        self.host_id = settings.host_id
        self.layout = Layout(settings.data_dir)
        self.gpu_indexes: tuple[int, ...] = ()
        self._given_log = event_log
        self._spares = Spares(self.layout.spares)
        self._runtime = runtime or make_runtime(settings, self._spares)
        self._roles = load_roles(settings.roles_file)
        # This host's address looked up once, here: its jobs' hosts files name it without
        # a lookup at each launch (which could wait on DNS).
        self._own_ip = resolve(settings.address)
        self._interface = interface_of(self._own_ip)  # resourceconfig.json names it
        self._gpus = None if gpus is None else list(gpus)
        self._clock = clock
        self._metrics = metrics
        self._starts: StartObserver | None = None  # on the host feed: fed by the runners
        self._store = AttemptStore(self.layout)
        self._mark: ViewMark | None = None  # read at start (the layout exists then)
        self._keeper = LogKeeper(
            self.layout, settings.log_cap_bytes, settings.log_retention_seconds
        )
        self._ready = asyncio.Event()
        self._stopping = asyncio.Event()
        self._follower: LogFollower | HostFeedFollower | None = None
        self._reporter: Reporter | None = None
        self._group: asyncio.TaskGroup | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._runners: dict[AttemptKey, AttemptRunner] = {}
        self._records: dict[AttemptKey, AttemptRecord] = {}
        self._holder: str | None = None  # what held this host at the last reconcile
        self._confirmed: set[AttemptKey] = set()
        self._kept_chains: set[str] | None = None
        # Cache folders that may be on disk (listed once, then added to by each launch):
        # the prune after every attempt lists no folder.
        self._caches: set[str] | None = None
        self._deleting: set[Path] = set()
        self._registering = False
        self._run_task: asyncio.Task[None] | None = None
        # Monotonic times of the last heartbeat sent and of the last one stored (health).
        self.beat_sent: float | None = None
        self.beat_stored: float | None = None
        self.event_log: JetStreamLog | None = None  # the log's connection, once made

    # ---- lifecycle -------------------------------------------------------------
    @property
    def state(self) -> State:
        """The folded log as this agent sees it."""
        if self._follower is None:
            raise PermanentNodeAgentError("the agent has not started")
        return self._follower.state

    @property
    def read_side(self) -> LogFollower | HostFeedFollower | None:
        """What this agent reads the log through (None before it starts): benchmarks listen."""
        return self._follower

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def runtime(self) -> JobRuntime:
        return self._runtime

    @property
    def log_position(self) -> int:
        """The last log sequence this agent has folded (0 before it starts)."""
        return 0 if self._follower is None else self._follower.seq

    def stop(self) -> None:
        """Ask `run()` to return: loops stop, running jobs are left to be re-adopted."""
        self._stopping.set()

    async def run(self) -> None:
        self.layout.create()
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(asyncio.to_thread, self._store.close)
            # Until it is ready, a stop cuts the start short (a bus that is not there
            # holds no stop up); from then on the loops below stop in order.
            starting = asyncio.create_task(self._start(stack), name="node-agent start")
            stopped = asyncio.create_task(self._stopping.wait())
            try:
                await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
                if not starting.done():
                    await cancel_and_wait(starting)
            if starting.cancelled():
                log.info("host=%s stopped before it was ready", self.host_id)
                return
            event_log, follower = starting.result()
            async with asyncio.TaskGroup() as group:
                self._group = group
                self._spawn(self._heartbeats(event_log), "heartbeats")
                self._spawn(self._prune_logs(), "prune logs")
                self._spawn(self._trim_live_logs(), "trim live logs")
                self._adopt_all()
                self._ready.set()
                log.info(
                    "host=%s ready: runtime=%s gpus=%s seq=%d",
                    self.host_id,
                    self._runtime.kind,
                    ",".join(map(str, self.gpu_indexes)) or "none",
                    follower.seq,
                )
                self._reconcile()
                try:
                    await self._stopping.wait()
                finally:
                    self._stopping.set()
                    self._ready.clear()
                    try:
                        await self._let_removals_end()
                    finally:  # also when the stop is cancelled during that wait
                        await self._cancel_tasks()
            self._group = None
        log.info("host=%s stopped", self.host_id)

    async def _start(
        self, stack: contextlib.AsyncExitStack
    ) -> tuple[JetStreamLog, LogFollower | HostFeedFollower]:
        """Connect, read the log up to now, register the host, serve its job logs; what
        needs closing goes on `stack`."""
        event_log = self._given_log
        if event_log is None:
            event_log = await JetStreamLog.connect(
                self.settings.nats_url,
                self.settings.stream,
                self.settings.subject_prefix,
                connection_name=f"qm-node-agent-{self.host_id}",
                credentials=self.settings.nats_credentials,
                replicas=self.settings.stream_replicas,
                create_stream=manages_stream(self.settings.nats_credentials),
                near_leader=self.settings.nats_near_log_leader,
            )
            stack.push_async_callback(event_log.close)
        self.event_log = event_log
        self.gpu_indexes = await self._detect_gpus()
        self._reporter = Reporter(event_log, self.host_id)
        follower = self._follower = self._read_side(event_log)
        self._mark = ViewMark(self.layout.view_mark_file)
        stack.callback(self._mark.close)
        if isinstance(follower, HostFeedFollower):  # no view older than it acted on
            launched = (record.view_seq for record in self._store.load_all())
            follower.seq = max(self._mark.seq, *launched, 0)
        follower.listen(self._on_batch, first=True)
        if self._metrics is not None:
            starts = StartObserver(self.host_id, self._metrics, lambda: follower.state)
            if isinstance(follower, HostFeedFollower):  # views, not reports: its own
                self._starts = starts  # reports, once stored (`AttemptRunner.on_running`)
            else:
                follower.listen(starts)
        await follower.start()
        stack.push_async_callback(follower.stop)
        await follower.catch_up(timeout=None)
        await self._register()
        logs = await serve_logs(
            event_log.nc,
            self.settings.subject_prefix,
            self.host_id,
            self._keeper,
            lambda job_id, attempt: (job_id, attempt) in self._runners,
        )
        stack.push_async_callback(logs.unsubscribe)
        return event_log, follower

    async def __aenter__(self) -> NodeAgent:
        self._run_task = asyncio.create_task(self.run(), name=f"node-agent {self.host_id}")
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait({self._run_task, ready}, return_when=asyncio.FIRST_COMPLETED)
        if self._run_task.done():
            ready.cancel()
            self._run_task.result()  # raises why it could not start
            raise PermanentNodeAgentError("the node agent stopped before it was ready")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._run_task is not None:
            await self._run_task

    def _read_side(self, event_log: JetStreamLog) -> LogFollower | HostFeedFollower:
        """Its host's views from the feed (the scheduler relays them), or the whole log."""
        if self._shared is not None:
            return self._shared
        if self.settings.read_whole_log:
            return LogFollower(event_log)
        return HostFeedFollower(event_log, self.host_id)

    # ---- registration and heartbeats ------------------------------------------------
    async def _detect_gpus(self) -> tuple[int, ...]:
        if self.settings.gpu_count is not None:
            return tuple(range(self.settings.gpu_count))
        gpus = self._gpus
        if gpus is None:
            gpus = await detect_gpus(self.settings.nvidia_smi)
        return tuple(gpu.index for gpu in gpus)

    async def _register(self) -> None:
        assert self._reporter is not None
        event = ev.HostRegistered(
            at=self._clock(),
            host_id=self.host_id,
            instance_type=self.settings.instance_type,
            gpu_count=len(self.gpu_indexes),
            service_environment=self.settings.service_environment,
            address=self.settings.address,
        )
        await self._reporter.append(event, f"{self.host_id}:registered:{event.at:.6f}")
        log.info("host=%s registered (%s)", self.host_id, self.settings.instance_type)

    async def _heartbeats(self, event_log: JetStreamLog) -> None:
        """Beats go to the liveness bucket, not the log (`bus.liveness`): the newest
        one replaces the last, so they cost the log nothing."""
        while not self._stopping.is_set():
            beat = Beat(host_id=self.host_id, at=self._clock())
            self.beat_sent = time.monotonic()
            try:
                await send_beat(event_log.js, event_log.stream, beat)
                self.beat_stored = time.monotonic()
            except BusError as err:  # the next one may be stored: one line, no traceback
                log.warning("host=%s heartbeat not stored (%s)", self.host_id, err)
            await asyncio.sleep(self.settings.heartbeat_seconds)

    async def _prune_logs(self) -> None:
        """Delete kept job logs past their retention (checked every minute at most)."""
        period = min(60.0, self.settings.log_retention_seconds)
        while not self._stopping.is_set():
            await asyncio.to_thread(self._keeper.prune, self._clock())
            await asyncio.sleep(period)

    async def _trim_live_logs(self) -> None:
        """Keep running attempts' logs within the cap on disk (their middle is freed)."""
        while not self._stopping.is_set():
            for key in list(self._runners):
                stem = self.layout.log_file(*key).stem
                await asyncio.to_thread(self._keeper.trim_live, stem)
            await asyncio.sleep(LIVE_LOG_TRIM_SECONDS)

    # ---- reconciliation ----------------------------------------------------------------
    def _on_batch(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        if not isinstance(self._follower, HostFeedFollower) and not self._concerns_me(events):
            return
        self._reconcile()

    def _concerns_me(self, events: list[ev.AnyEvent]) -> bool:
        """Whether a batch of the whole log may change what this host must do: it names the
        host, or a job or pool on it, or a job this host holds a record of (whose new
        attempt may have left it). The relay publishes a host's view on the same rule;
        most batches of a many-host log concern other hosts. `_holder` is the job or pool
        that held the host at the last look: an ended pool no longer names its hosts."""
        hosts, jobs = touched(self.state, events)
        if self.host_id in hosts or self._holder in jobs:
            return True
        return any(key[0] in jobs for key in self._records)

    def _reconcile(self) -> None:
        """Make this host match the folded state (runs after every folded batch)."""
        if not self._ready.is_set() or self._stopping.is_set() or self._group is None:
            return
        state = self.state
        host = state.hosts.get(self.host_id)
        if host is None:
            return
        self._holder = host.holder
        self._keep_registered(host.status)
        for key, runner in self._runners.items():
            reason = stop_reason(state, self.host_id, *key)
            if reason is not None:
                runner.request_stop(reason)
        job = attempt_on(state, self.host_id)
        if job is not None:
            key = (job.job_id, job.attempt_no)
            launched = key in self._runners or key in self._records
            if not launched and should_run(job, self.host_id):
                self._launch(job)
                # After the launch's first step, which starts the job: the view that
                # starts an idle host's next job also ends its last one (0.3 ms p50).
                asyncio.get_running_loop().call_soon(self._tidy)
                return
            if not launched and key not in self._confirmed and stop_wanted_for(job, self.host_id):
                self._confirm_unlaunched(job)
        self._tidy()

    def _tidy(self) -> None:
        """Drop what the log says is over on this host: ended attempts' records and
        files, warm pool caches no longer kept."""
        if self._stopping.is_set():
            return
        state = self.state
        chores = Chores()
        self._forget_finished(state, chores)
        self._prune_caches(state, chores)
        if chores.todo:
            self._spawn(self._do(chores), "tidy files")

    async def _do(self, chores: Chores) -> None:
        """The chores' file work, in order, in one worker thread (a hand-off costs the
        loop about what a small chore does: three a job were 7 % of an agent's CPU);
        one that fails is logged, and the others still run."""

        def run_all() -> None:
            for name, chore in chores.todo:
                try:
                    chore()
                except Exception:
                    log.exception("host=%s %s failed", self.host_id, name)

        try:
            await asyncio.to_thread(run_all)
        finally:
            self._deleting.difference_update(chores.deleting)

    def _keep_registered(self, status: HostStatus) -> None:
        """A host declared lost while its agent lives registers again."""
        if status is not HostStatus.LOST:
            self._registering = False
        elif not self._registering:
            self._registering = True
            log.warning("host=%s is LOST in the log but alive: registering again", self.host_id)
            self._spawn(self._register(), "re-register")

    def _launch(self, job: Job) -> None:
        key = (job.job_id, job.attempt_no)
        spec: LaunchSpec | LaunchError
        hosts = self.state.hosts
        try:
            spec = build_spec(
                job,
                host=self.host_id,
                instance_type=self.settings.instance_type,
                gpu_indexes=self.gpu_indexes,
                cache_dir=self.layout.cache_dir(job.chain_id),
                work_dir=self.layout.work_dir(*key),
                ml_dir=self.layout.ml_dir(job.chain_id),
                hosts_file=self.layout.hosts_file(job.chain_id),
                access_for=self._roles.access,
                addresses={
                    h: self._own_ip if h == self.host_id else hosts[h].address
                    for h in job.hosts
                    if h in hosts
                },
                network_interface=self._interface,
            )
        except LaunchError as err:
            spec = err
        record = AttemptRecord(
            job_id=job.job_id,
            attempt=job.attempt_no,
            host=self.host_id,
            runtime=self._runtime.kind,
            chain_id=job.chain_id,
            launched_at=self._clock(),
            container=container_name(*key),
            exit_file=str(self.layout.exit_file(*key)),
            log_file=str(self.layout.log_file(*key)),
            outputs=spec.contract.outputs if isinstance(spec, LaunchSpec) else None,
            view_seq=self.log_position,
        )
        self._records[key] = record  # the runner saves it durably before anything starts
        if self._caches is not None:  # its runtime may make the chain's cache folder
            self._caches.add(safe_name(job.chain_id))
        runner = self._runner(record)
        trace = self._follower.traces.get(job.job_id) if self._follower is not None else None
        launch = runner.launch(spec, job.timeout_seconds, trace)
        self._spawn(self._drive(runner, launch), f"run {key}")

    def _adopt_all(self) -> None:
        state = self.state
        for record in self._store.load_all():
            if record.host != self.host_id:
                log.warning("record %s is for host %s: ignored", record.key, record.host)
                continue
            self._records[record.key] = record
            job = state.jobs.get(record.job_id)
            current = job is not None and is_current(state, self.host_id, *record.key)
            timeout = job.timeout_seconds if job is not None and current else None
            running_at = job.running_at if job is not None and current else None
            runner = self._runner(record)
            body = self._drive(runner, runner.adopt(timeout, running_at))
            self._spawn(body, f"adopt {record.key}")
        live = {self.layout.log_file(*key).stem for key in self._records}
        self._spawn(asyncio.to_thread(self._keeper.keep_orphans, live, self._clock()), "keep logs")

    def _runner(self, record: AttemptRecord) -> AttemptRunner:
        assert self._reporter is not None
        runner = AttemptRunner(
            record,
            runtime=self._runtime,
            store=self._store,
            reporter=self._reporter,
            grace_s=self.settings.stop_grace_seconds,
            clock=self._clock,
            on_running=self._started,
            access_for=self._roles.access,
            checkpointed=self._checkpointed,
        )
        self._runners[record.key] = runner
        return runner

    async def _checkpointed(self, record: AttemptRecord, done: Round) -> None:
        """A completed checkpoint upload: on the log, so it knows what a stop would lose."""
        assert self._reporter is not None
        event = ev.JobCheckpointed(
            at=done.at,
            job_id=record.job_id,
            attempt=record.attempt,
            host=record.host,
            bytes=done.bytes,
            files=done.files,
        )
        msg_id = f"{record.job_id}:{record.attempt}:{record.host}:checkpoint:{done.at!r}"
        await self._reporter.append(event, msg_id)

    def _started(self, report: ev.JobRunning) -> None:
        """Time this host's start from its own stored report (views may skip a RUNNING)."""
        if self._starts is not None:
            self._starts(self.log_position, "", [report])

    async def _drive(self, runner: AttemptRunner, body: Coroutine[Any, Any, None]) -> None:
        try:
            await body
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "job_id=%s attempt=%d failed in the agent",
                *runner.key,
                extra={"job_id": runner.key[0], "host": self.host_id},
            )
        finally:
            self._runners.pop(runner.key, None)
            self._records[runner.key] = runner.record
            self._reconcile()

    def _confirm_unlaunched(self, job: Job) -> None:
        """The stop came before this host launched its part: nothing to stop, confirm it."""
        assert self._reporter is not None
        key = (job.job_id, job.attempt_no)
        self._confirmed.add(key)
        log.info(
            "job_id=%s attempt=%d stopped before launch: confirming",
            *key,
            extra={"job_id": job.job_id, "share": job.share, "host": self.host_id},
        )
        event = ev.JobStopConfirmed(
            at=self._clock(),
            job_id=job.job_id,
            attempt=job.attempt_no,
            host=self.host_id,
            exit_code=None,
        )
        self._spawn(self._reporter.report(event), f"confirm {key}")

    def _forget_finished(self, state: State, chores: Chores) -> None:
        """Drop records (and work files) of attempts the log says are over on this host."""
        for key in list(self._records):
            if key in self._runners or is_current(state, self.host_id, *key):
                continue
            if self._mark is not None:  # before the record goes (see `viewmark`)
                self._mark.advance(self.log_position)
            del self._records[key]
            self._store.delete(*key)
            chores.todo.append(
                (f"retire {key}", functools.partial(self._retire, key, self._clock()))
            )
        self._confirmed = {k for k in self._confirmed if is_current(state, self.host_id, *k)}

    def _retire(self, key: AttemptKey, ended_at: float) -> None:
        """An ended attempt's files (a chore): its log kept (capped, for the retention
        period), its exit file and work dir deleted. Runs once per attempt: its record
        is dropped before."""
        self._keeper.keep(self.layout.log_file(*key).stem, ended_at)
        self._spares.give_file(self.layout.exit_file(*key))
        self._spares.give_dir(self.layout.work_dir(*key))

    def _prune_caches(self, state: State, chores: Chores) -> None:
        """Delete warm pool caches that neither an attempt nor an Available pool keeps."""
        keep = cache_chains(state, self.host_id)
        keep |= {runner.record.chain_id for runner in self._runners.values()}
        if keep == self._kept_chains:
            return
        self._kept_chains = keep
        self._spawn(self._runtime.release(set(keep)), "release warm pools")
        if self._caches is None:
            self._caches = {path.name for path in self.layout.cache_root.iterdir()}
            self._caches |= {path.name for path in self.layout.ml_root.iterdir()}
        names = {safe_name(chain) for chain in keep}
        self._caches |= names
        for name in sorted(self._caches - names):
            self._caches.discard(name)
            log.debug("host=%s deleting the cache of chain %s", self.host_id, name)
            self._delete_later(chores, self.layout.cache_root / name)
            # Its /opt/ml: emptied of what jobs wrote and kept as a spare tree for the
            # process runtime's next chain (docker removes it: a sandbox may mount it).
            tree = self.layout.ml_root / name
            if self._runtime.kind == RuntimeKind.PROCESS.value:
                spare = functools.partial(self._spares.give_tree, reset=reset_chain_tree)
                self._delete_later(chores, tree, spare)
            else:
                rmtree = functools.partial(shutil.rmtree, ignore_errors=True)
                self._delete_later(chores, tree, rmtree)

    def _delete_later(
        self, chores: Chores, path: Path, give: Callable[[Path], None] | None = None
    ) -> None:
        """A chore: hand the folder, if there is one, to `give` (default: empty it and
        keep it as a spare)."""
        if path in self._deleting:
            return
        self._deleting.add(path)
        chores.deleting.append(path)
        dispose = give or self._spares.give_dir

        def delete() -> None:
            if path.exists():
                dispose(path)

        chores.todo.append((f"delete {path.name}", delete))

    async def _let_removals_end(self) -> None:
        """Attempts that have reported their end remove their part (a container, and a
        warm pool's next sandbox) before the agent stops. Cut there, a stopped container
        stayed on the engine until the agent's next start; running parts stay (a
        restarted agent adopts them)."""
        removals = [
            runner.cleanup
            for runner in self._runners.values()
            if runner.cleanup is not None and not runner.cleanup.done()
        ]
        if removals:
            log.info("host=%s waiting for %d removals before stopping", self.host_id, len(removals))
            await asyncio.wait(removals, timeout=REMOVALS_WAIT_S)

    async def _cancel_tasks(self) -> None:
        """Cancel every task, again until each has ended.

        Once is not always enough: `asyncio.wait_for` (3.11) drops a cancellation
        that arrives just as what it waits for completes, and the task carries on.
        """
        while self._tasks:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.wait(list(self._tasks), timeout=0.2)

    def _spawn(self, body: Coroutine[Any, Any, Any], name: str) -> None:
        if self._group is None:
            body.close()
            return
        task = self._group.create_task(self._logged(body, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _logged(self, body: Coroutine[Any, Any, Any], name: str) -> None:
        try:
            await body
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("host=%s task %s failed", self.host_id, name)
