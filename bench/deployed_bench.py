"""The deployed topology, each service a process of its own, against `qm up` in the same run.

The topology is the one compose and Kubernetes run, on loopback: a 3-node NATS cluster
(`NatsCluster`, each node's HTTP monitor on), the stream and buckets at `--replicas`
(3, or 1), Postgres (embedded), and as separate `python -m` processes configured only by
environment: admission, two schedulers (one leads, one stands by), the warm-pool
service and 4 node agents on the process runtime. `--secure` (the default) sets it up
as `qm deploy bootstrap` does for compose: NATS users with mutual TLS on the client
port, TLS and a route login on the cluster port, admission on TLS with bearer tokens
(the bootstrap's admin token); `--plaintext` runs it without.

Each run builds a fresh topology and a fresh `qm up` (shared fold, agents in the stack,
secured unless `--plaintext`), in alternating order, and measures on each:

- jobs/s: N x `true` on 4 hosts, submitted in bulk by a client in a process of its own
  and timed to the last SUCCEEDED (`short_jobs_bench.run_once`, as for `qm up`);
- idle submit->RUNNING p50: jobs one after another (`e2e_bench.latency_run`);
- CPU-seconds per 1000 jobs of each process over the timed N jobs (its children's too:
  an agent reaps the jobs' wrappers);
- idle submit->RUNNING by phase, over the same jobs, from the log (each message's NATS
  server timestamp, each event's own time): the call to the submit stored, to the
  decision stored, to the agent's JobStarting, to its JobRunning, to that report
  stored, and to the client's watch seeing RUNNING (p50 of each run);
- for the topology, over the same N jobs: NATS messages per job (in + out, from each
  node's /varz; the part between the nodes from /routez, the part of each client
  connection from /connz, named by connection) and appends per job by stream and, in
  the log, by subject family (from stream info).

Prints min/median/max over the runs and the topology's ratio to `qm up`; asserts nothing.

    python bench/deployed_bench.py [--runs 4] [--jobs 1000] [--replicas 3]
        [--plaintext] [--rounds 30] [--only deployed|qm-up]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import psutil
import short_jobs_bench
from e2e_bench import in_a_process as latency_in_a_process

from quartermaster.bus.access import NatsCredentials
from quartermaster.cli.bus import bus_target
from quartermaster.client import Quartermaster, TrainingQueue
from quartermaster.deploy.command import main as deploy_main
from quartermaster.deploy.secrets import admin_credentials
from quartermaster.embedded.nats_auth import BusLayout
from quartermaster.embedded.nats_cluster import NatsCluster, wait_for_jetstream
from quartermaster.embedded.postgres import EmbeddedPostgres
from quartermaster.eventlog.bootstrap import bootstrap
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread

UNIT = short_jobs_bench.UNIT
HOSTS = short_jobs_bench.HOSTS
HOST_IDS = [f"h{i + 1}" for i in range(HOSTS)]
LAYOUT = BusLayout()


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Topology:
    """The deployed topology under `root`; `with` starts it and stops all it started."""

    def __init__(self, root: Path, replicas: int, secure: bool) -> None:
        self.root = root
        self.replicas = replicas
        self.secure = secure
        self.boot = root / "boot"
        self.nats: NatsCluster | None = None
        self.postgres: EmbeddedPostgres | None = None
        self.postgres_url = ""
        self.port = free_port()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def credentials_dir(self) -> Path | None:
        return self.boot / "credentials" if self.secure else None

    def admin(self) -> NatsCredentials:
        return admin_credentials(self.boot) if self.secure else NatsCredentials()

    def __enter__(self) -> Topology:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> None:
        extra: tuple[str, ...] = ()
        route_login = ""
        if self.secure:  # the files compose's bootstrap makes (its nats-dir: ours)
            argv = ["bootstrap", f"--out={self.boot}", f"--host={','.join(HOST_IDS)}"]
            argv += ["--admission-name=localhost,127.0.0.1", "--nats-name=localhost,127.0.0.1"]
            argv += [f"--nats-dir={self.boot / 'nats'}"]
            if deploy_main(argv) != 0:
                raise RuntimeError("qm deploy bootstrap failed")
            config = self.boot / "node.conf"  # includes are relative to the config's dir
            config.write_text(
                'include "nats/nats-auth.conf"\ncluster {\n  include "nats/nats-cluster.conf"\n}\n'
            )
            extra = ("--config", str(config))
            route = (self.boot / "credentials" / "route.password").read_text().strip()
            route_login = f"route:{route}"
        self.nats = NatsCluster(
            self.root / "nats", 3, monitor=True, extra_args=extra, route_login=route_login
        )
        self.nats.start()
        self.postgres = EmbeddedPostgres(self.root / "pg").start()
        asyncio.run(self._bus_and_database())
        self._start_services()

    async def _bus_and_database(self) -> None:
        assert self.nats is not None and self.postgres is not None
        if not self.secure:
            await wait_for_jetstream(self.nats.url)
        deadline = time.monotonic() + 60
        while True:  # the meta leader may take a few seconds
            try:
                await bootstrap(self.nats.url, LAYOUT, self.admin(), replicas=self.replicas)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        self.postgres_url = await self.postgres.create_database("quartermaster")

    def _bus_env(self, prefix: str, part: str, user_file: str = "nats.user") -> dict[str, str]:
        assert self.nats is not None
        env = {"NATS_URL": self.nats.url, "STREAM_REPLICAS": str(self.replicas)}
        if self.secure:
            secrets = self.boot / part
            env |= {
                "NATS_USER_FILE": str(secrets / user_file),
                "NATS_PASSWORD_FILE": str(secrets / user_file.replace(".user", ".password")),
                "NATS_TLS_CA": str(secrets / "ca.pem"),
                "NATS_TLS_CERT": str(secrets / "nats-client.pem"),
                "NATS_TLS_KEY": str(secrets / "nats-client-key.pem"),
            }
        return {prefix + key: value for key, value in env.items()}

    def _start_services(self) -> None:
        admission = {
            "GRPC_PORT": str(self.port),
            "POSTGRES_URL": self.postgres_url,
            "REQUIRE_COMMAND": "true",
        }
        if self.secure:
            secrets = self.boot / "admission"
            admission |= {
                "TLS_CERT_FILE": str(secrets / "server.pem"),
                "TLS_KEY_FILE": str(secrets / "server-key.pem"),
                "TOKEN_PUBLIC_KEY_FILE": str(secrets / "token-verify.pem"),
                "PAGE_TOKEN_SECRET_FILE": str(secrets / "page-token.key"),
            }
        else:
            admission["INSECURE"] = "true"
        self._spawn("admission", "qm_admission", "QM_ADMISSION_", admission)
        for n in (1, 2):  # as compose: one leads, one stands by
            own = {"INSTANCE_ID": f"scheduler-{n}", "HEARTBEAT_TIMEOUT_SECONDS": "15"}
            self._spawn(f"scheduler-{n}", "qm_scheduler", "QM_SCHEDULER_", own)
        self._spawn("warmpool", "qm_warmpool", "QM_WARMPOOL_", {"TICK_SECONDS": "2"})
        for host in HOST_IDS:
            own = {
                "HOST_ID": host,
                "INSTANCE_TYPE": UNIT,
                "DATA_DIR": str(self.root / "nodes" / host),
                "RUNTIME": "process",
                "GPU_COUNT": "0",
                "HEARTBEAT_SECONDS": "2",
                "STOP_GRACE_SECONDS": "5",
                "JOB_PATH": os.environ.get("PATH", os.defpath),
            }
            self._spawn(host, "qm_node_agent", "QM_NODE_", own, bus=("nodes", f"{host}.user"))

    def _spawn(
        self,
        name: str,
        module: str,
        prefix: str,
        own: dict[str, str],
        bus: tuple[str, str] | None = None,
    ) -> None:
        part, user_file = bus or (name.split("-")[0], "nats.user")
        env = {k: v for k, v in os.environ.items() if not k.startswith("QM_")}
        env |= self._bus_env(prefix, part, user_file)
        env |= {prefix + key: value for key, value in own.items()}
        log_file = (self.root / f"{name}.log").open("wb")
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", module],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log_file.close()

    def stop(self) -> None:
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        for name, process in self.processes.items():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                print(f"{name} did not stop in 15 s: killed", file=sys.stderr)
                process.kill()
                process.wait()
        self.processes = {}
        if self.postgres is not None:
            self.postgres.stop()
            self.postgres = None
        if self.nats is not None:
            self.nats.stop()
            self.nats = None

    def check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                tail = (self.root / f"{name}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail}")

    def cpu(self) -> dict[str, float]:
        """CPU-seconds of each process so far (with the children it reaped), by part."""
        assert self.nats is not None
        seconds = {name: _cpu(process.pid) for name, process in self.processes.items()}
        for index in range(len(self.nats.nodes)):
            pid = self.nats.pid(index)
            seconds[f"nats-{index + 1}"] = 0.0 if pid is None else _cpu(pid)
        seconds["postgres"] = _postgres_cpu(self.root / "pg")
        return seconds

    def phases(self, timed: list[Any]) -> dict[str, float]:
        assert self.nats is not None
        return start_phases(timed, self.nats.urls, self.admin(), LAYOUT.stream)

    def monitor(self) -> Monitor:
        assert self.nats is not None
        return Monitor.read([node.monitor_url for node in self.nats.nodes], self)


def _cpu(pid: int) -> float:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(t.user + t.system + t.children_user + t.children_system)


def _postgres_cpu(data_dir: Path) -> float:
    """The postmaster and its backends (found by their data dir on the command line)."""
    total = 0.0
    for process in psutil.process_iter(["name", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if process.info["name"] == "postgres" and str(data_dir) in " ".join(
                process.info["cmdline"] or ()
            ):
                for member in [process, *process.children(recursive=True)]:
                    t = member.cpu_times()
                    total += t.user + t.system
    return total


class Monitor:
    """What the NATS nodes and streams say at one moment: message counters to subtract."""

    def __init__(self) -> None:
        self.totals: Counter[str] = Counter()  # in/out msgs of all nodes, routes, clients
        self.connections: Counter[str] = Counter()  # in+out msgs by connection name
        self.appends: Counter[str] = Counter()  # last seq by stream
        self.subjects: Counter[str] = Counter()  # the log's messages by subject family

    @classmethod
    def read(cls, urls: list[str], topology: Topology) -> Monitor:
        m = cls()
        for url in urls:
            varz = _get(f"{url}/varz")
            m.totals["in"] += varz["in_msgs"]
            m.totals["out"] += varz["out_msgs"]
            for route in _get(f"{url}/routez").get("routes") or []:
                m.totals["routes"] += route["in_msgs"] + route["out_msgs"]
            for conn in _get(f"{url}/connz?limit=4096").get("connections") or []:
                name = _family_of_connection(conn.get("name") or "?")
                m.connections[name] += conn["in_msgs"] + conn["out_msgs"]
        asyncio.run(m._streams(topology))
        return m

    async def _streams(self, topology: Topology) -> None:
        assert topology.nats is not None
        nc = await nats.connect(
            topology.nats.urls, name="qm-bench-monitor", **topology.admin().connect_options()
        )
        try:
            js = nc.jetstream(timeout=10)
            for info in await js.streams_info():
                self.appends[info.config.name or "?"] = info.state.last_seq
            info = await js.stream_info(LAYOUT.stream, subjects_filter=">")
            for subject, count in (info.state.subjects or {}).items():
                self.subjects[subject.split(".")[1] if "." in subject else subject] += count
        finally:
            await nc.close()

    def minus(self, before: Monitor) -> Monitor:
        d = Monitor()
        for field in ("totals", "connections", "appends", "subjects"):
            mine, theirs = getattr(self, field), getattr(before, field)
            setattr(d, field, Counter({k: mine[k] - theirs[k] for k in mine}))
        return d


def _family_of_connection(name: str) -> str:
    """qm-node-agent-h3 -> qm-node-agent; qm-scheduler-leases-<holder> -> qm-scheduler-leases."""
    for prefix in ("qm-node-agent", "qm-scheduler-leases"):
        if name.startswith(prefix):
            return prefix
    return name


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def set_up_queue(address: str, credentials_dir: Path | None) -> None:
    client = Quartermaster(address, credentials_dir=credentials_dir)
    try:
        deadline = time.monotonic() + 120
        while True:  # admission serves once its fold and projection caught up
            try:
                client.create_service_environment("env", {UNIT: HOSTS})
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        client.create_scheduling_policy("fifo")
        client.create_job_queue("q", "env", "fifo")
        client.create_quota_share("q", "A", {UNIT: HOSTS}, "LEND_AND_BORROW")
        warm_up = TrainingQueue("q", client)  # hosts registered, paths hot
        short_jobs_bench.run_once(client, warm_up, -1, HOSTS * 2)
    finally:
        client.close()


PHASES = (
    "call -> submit stored",
    "submit stored -> decision stored",
    "decision stored -> JobStarting",
    "JobStarting -> JobRunning (launch)",
    "JobRunning -> stored",
    "stored -> client saw RUNNING",
)


def start_phases(
    timed: list[Any], servers: list[str], who: NatsCredentials, stream: str
) -> dict[str, float]:
    """p50 of each phase of the latency jobs (ms), read back from the log as `who`."""
    options = who.connect_options()
    if inbox := who.inbox_prefix():  # a user of its own gets replies on its own inboxes
        options["inbox_prefix"] = inbox
    seen = asyncio.run(_log_times(servers, options, stream, {t.job_id for t in timed}))
    values: dict[str, list[float]] = {phase: [] for phase in PHASES}
    for t in timed:
        times = seen.get(t.job_id, {})
        needed = ("JobSubmitted", "JobDispatched", "JobStarting@", "JobRunning@", "JobRunning")
        if not all(key in times for key in needed):
            continue
        marks = [t.call, *(times[key] for key in needed), t.running]
        for phase, (a, b) in zip(PHASES, itertools.pairwise(marks), strict=True):
            values[phase].append((b - a) * 1e3)
    return {phase: statistics.median(v) for phase, v in values.items() if v}


async def _log_times(
    servers: list[str], options: dict[str, Any], stream: str, jobs: set[str]
) -> dict[str, dict[str, float]]:
    """job id -> {event kind: stored at (server clock), kind@: the event's own `at`}."""
    from quartermaster.eventlog.envelope import decode_batch

    nc = await nats.connect(servers, name="qm-bench-phases", **options)
    try:
        js = nc.jetstream(timeout=10)
        last = (await js.stream_info(stream)).state.last_seq
        sub = await js.subscribe(f"{LAYOUT.subject_prefix}.>", stream=stream, ordered_consumer=True)
        seen: dict[str, dict[str, float]] = {}
        while last:
            msg = await sub.next_msg(timeout=10)
            stored = msg.metadata.timestamp.timestamp()
            for event in decode_batch(msg.data):
                job_id = getattr(event, "job_id", None)
                if job_id in jobs:
                    kinds = seen.setdefault(job_id, {})
                    kinds.setdefault(type(event).__name__, stored)
                    kinds.setdefault(f"{type(event).__name__}@", event.at)
            if msg.metadata.sequence.stream >= last:
                break
        await sub.unsubscribe()
        return seen
    finally:
        await nc.close()


class Figures:
    def __init__(self) -> None:
        self.rates: list[float] = []
        self.latency_ms: list[float] = []
        self.phases: dict[str, list[float]] = {}  # phase -> p50 ms, per run
        self.cpu: dict[str, list[float]] = {}  # part -> CPU-s per 1000 jobs, per run
        self.messages: list[Monitor] = []  # per run, over the timed jobs


def measure(
    name: str,
    address: str,
    credentials_dir: Path | None,
    run: int,
    jobs: int,
    rounds: int,
    figures: Figures,
    cpu: Callable[[], dict[str, float]],
    monitor: Callable[[], Monitor] | None = None,
    log_phases: Callable[[list[Any]], dict[str, float]] | None = None,
) -> None:
    """The timed N jobs (CPU and messages over them), then the idle latency run."""
    set_up_queue(address, credentials_dir)
    before_cpu = cpu()
    before = monitor() if monitor else None
    seconds = short_jobs_bench.in_a_process(address, credentials_dir, run, jobs, True)
    after = monitor() if monitor else None
    after_cpu = cpu()
    figures.rates.append(jobs / seconds)
    for part, value in after_cpu.items():
        figures.cpu.setdefault(part, []).append((value - before_cpu.get(part, 0.0)) / jobs * 1e3)
    if before is not None and after is not None:
        figures.messages.append(after.minus(before))
    time.sleep(1.0)  # idle
    timed = latency_in_a_process(address, credentials_dir, run, rounds)
    figures.latency_ms.append(statistics.median(t.latency for t in timed) * 1e3)
    if log_phases is not None:
        for phase, p50 in log_phases(timed).items():
            figures.phases.setdefault(phase, []).append(p50)
    total_cpu = sum(after_cpu.values()) - sum(before_cpu.values())
    line = (
        f"run {run} {name}: {figures.rates[-1]:.1f} jobs/s, submit->RUNNING p50"
        f" {figures.latency_ms[-1]:.1f} ms, CPU {total_cpu / jobs * 1e3:.2f} s per 1000 jobs"
    )
    if figures.messages:
        d = figures.messages[-1]
        line += (
            f", NATS msgs/job {(d.totals['in'] + d.totals['out']) / jobs:.1f}"
            f" (routes {d.totals['routes'] / jobs:.1f}),"
            f" appends/job {sum(d.appends.values()) / jobs:.2f}"
        )
    print(line, flush=True)


def run_deployed(args: argparse.Namespace, run: int, figures: Figures) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="qm-deployed-") as tmp,
        Topology(Path(tmp), args.replicas, not args.plaintext) as topology,
    ):
        measure(
            f"deployed ({args.replicas} replicas)",
            topology.address,
            topology.credentials_dir,
            run,
            args.jobs,
            args.rounds,
            figures,
            topology.cpu,
            topology.monitor,
            topology.phases,
        )
        topology.check_alive()


def run_qm_up(args: argparse.Namespace, run: int, figures: Figures) -> None:
    with tempfile.TemporaryDirectory(prefix="qm-up-") as tmp:
        settings = StackSettings(
            data_dir=Path(tmp),
            nodes=HOSTS,
            grpc_port=0,
            gpus_per_node=0,
            stop_grace_seconds=5,
            secure=not args.plaintext,
        )
        with StackThread(settings) as stack:

            def cpu() -> dict[str, float]:
                seconds = {"qm up (its process)": short_jobs_bench.own_cpu()}
                for child in psutil.Process().children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        if child.name() in ("nats-server", "weed"):
                            t = child.cpu_times()
                            seconds[child.name()] = (
                                seconds.get(child.name(), 0.0) + t.user + t.system
                            )
                # Not a child: pg_ctl starts the postmaster, and exits.
                seconds["postgres"] = _postgres_cpu(Path(tmp) / "postgres")
                seconds["jobs (reaped)"] = short_jobs_bench.children_cpu()
                return seconds

            def phases(timed: list[Any]) -> dict[str, float]:
                flags = argparse.Namespace(
                    data_dir=tmp, nats_url=None, stream=None, subject_prefix=None
                )
                target = bus_target(flags, environ={}).settings  # stack.json's auditor
                who = target.nats_credentials()
                return start_phases(timed, target.nats_url.split(","), who, target.stream)

            measure(
                "qm up", stack.address, stack.credentials_dir, run, args.jobs, args.rounds,
                figures, cpu, log_phases=phases,
            )  # fmt: skip


def summary(values: list[float], fmt: str = ".1f") -> str:
    return f"{min(values):{fmt}} / {statistics.median(values):{fmt}} / {max(values):{fmt}}"


def report(args: argparse.Namespace, deployed: Figures, qm_up: Figures) -> None:
    mode = "plaintext" if args.plaintext else "secured (TLS, NATS users, tokens)"
    print(f"\n{args.jobs} x `true` on {HOSTS} hosts, {args.runs} runs, {mode}; min / median / max")
    for name, f in ((f"deployed, {args.replicas} replicas", deployed), ("qm up", qm_up)):
        if not f.rates:
            continue
        print(f"  {name:28} jobs/s {summary(f.rates)}   submit->RUNNING p50 "
              f"{summary(f.latency_ms)} ms")  # fmt: skip
    if deployed.rates and qm_up.rates:
        ratios = [d / q for d, q in zip(deployed.rates, qm_up.rates, strict=False)]
        print(f"  deployed / qm up (same run)  jobs/s {summary(ratios, '.2f')}")
    for name, f in (("deployed", deployed), ("qm up", qm_up)):
        if f.phases:
            print(f"  idle submit->RUNNING by phase, {name} (p50 of each run, ms):")
            for phase in PHASES:
                if phase in f.phases:
                    print(f"    {phase:36} {summary(f.phases[phase], '.2f')}")
    for name, f in (("deployed", deployed), ("qm up", qm_up)):
        if f.cpu:
            print(f"  CPU-s per 1000 jobs, {name}:")
            for part, values in f.cpu.items():
                print(f"    {part:24} {summary(values, '.2f')}")
    if deployed.messages:
        jobs = args.jobs
        print("  NATS messages per job (deployed, over the timed jobs):")

        def line(label: str, values: list[float]) -> None:
            print(f"    {label:34} {summary(values, '.2f')}")

        ms = deployed.messages
        line(
            "in + out, all nodes (/varz)",
            [(m.totals["in"] + m.totals["out"]) / jobs for m in ms],
        )
        line("  between nodes (/routez)", [m.totals["routes"] / jobs for m in ms])
        for conn in sorted({k for m in ms for k in m.connections}):
            line(f"  connection {conn}", [m.connections[conn] / jobs for m in ms])
        print("  appends per job, by stream and (log) subject family:")
        for stream in sorted({k for m in ms for k in m.appends}):
            line(f"  stream {stream}", [m.appends[stream] / jobs for m in ms])
        for family in sorted({k for m in ms for k in m.subjects}):
            line(f"    {LAYOUT.subject_prefix}.{family}", [m.subjects[family] / jobs for m in ms])


def _stop_on_term(signum: int, _frame: object) -> None:
    """SIGTERM (`timeout`, a CI step) unwinds like Ctrl-C, so every `with` stops what it
    started: the topology's processes lead sessions of their own and get no signal, and
    were left running, idle but busy enough to slow the next runs."""
    raise SystemExit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, _stop_on_term)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30, help="jobs per latency run")
    parser.add_argument("--replicas", type=int, choices=(1, 3), default=3)
    parser.add_argument("--plaintext", action="store_true", help="no TLS, users or tokens")
    parser.add_argument("--only", choices=("deployed", "qm-up"), default=None)
    args = parser.parse_args()
    deployed, qm_up = Figures(), Figures()
    for run in range(args.runs):
        pairs: list[tuple[Callable[[argparse.Namespace, int, Figures], None], Figures]] = [
            (run_deployed, deployed),
            (run_qm_up, qm_up),
        ]
        if run % 2:
            pairs.reverse()  # alternate which goes first
        for runner, figures in pairs:
            if args.only == "deployed" and runner is run_qm_up:
                continue
            if args.only == "qm-up" and runner is run_deployed:
                continue
            runner(args, run, figures)
    report(args, deployed, qm_up)


if __name__ == "__main__":
    main()
