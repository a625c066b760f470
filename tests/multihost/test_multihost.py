"""The system over many hosts, with faults: no job lost, none run twice, all terminal.

Hosts are network namespaces on a bridge with no uplink (see `harness`); the
deployment is `system`; the training platform is `driver.py`, on a host of its own.
While 2,000 short jobs run, the harness injects, one after the other, each
followed by a supervisor's restart: kill -9 of a NATS node, of the scheduler
leading the queue, of an admission replica and of a node agent; then it cuts one
host's link for longer than the heartbeat timeout. The job on that host must move
to another host with no attempt used (every job allows one attempt only, so a
used attempt would fail it), and the cut host must not run it again once the link
is back (spec: host lost while SCHEDULED/STARTING/RUNNING -> RUNNABLE, no attempt
used; the agent drops what its host no longer holds).

Every run of a job writes a marker file `<job>.<attempt>.<host>.<pid>` into a
shared directory, so runs are counted by what actually ran. Figures are printed
(jobs/s, failover times, lease moves, counts per fault); no timing is asserted.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from multihost.harness import HostNetwork, Processes, unavailable_reason
from multihost.system import System, Timing

pytestmark = [pytest.mark.multihost, pytest.mark.timeout(1500)]

JOBS = 2000
PHASE_JOBS = 250  # jobs finished between two faults (the first phase has no fault)
RUN_TIMEOUT_S = 900


@pytest.fixture
def system() -> Iterator[System]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"multi-host run {reason}")
    root = Path(tempfile.mkdtemp(prefix="qm-multihost-"))
    built = System(root, HostNetwork(), Processes(root / "logs"), Timing())
    try:
        yield built
    finally:
        try:
            built.procs.stop_all()
            if built.nats is not None:
                built.nats.stop()
        finally:
            built.net.teardown()
            print(f"\nlogs kept in {root / 'logs'}" if _failed(root) else "")
            if not _failed(root):
                shutil.rmtree(root, ignore_errors=True)


def _failed(root: Path) -> bool:
    return not (root / "passed").exists()


class Run:
    """Watches the driver's progress file and times what the faults cost."""

    def __init__(self, system: System, progress: Path, driver: Any) -> None:
        self.system = system
        self.progress_file = progress
        self.driver = driver
        self.figures: dict[str, str] = {}

    def progress(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.progress_file.read_text()))
        except (OSError, ValueError):
            return {"done": 0, "submitted": 0}

    def until(self, what: str, predicate: Callable[[], bool], timeout_s: float = 300) -> float:
        began = time.monotonic()
        while not predicate():
            if self.driver.poll() is not None:
                raise AssertionError(f"driver ended (rc {self.driver.returncode}) before {what}")
            if time.monotonic() - began > timeout_s:
                raise AssertionError(f"not reached in {timeout_s}s: {what} ({self.progress()})")
            time.sleep(0.1)
        return time.monotonic() - began

    def until_done(self, jobs: int) -> None:
        self.until(f"{jobs} jobs done", lambda: self.progress()["done"] >= jobs)

    def next_progress(self, timeout_s: float = 120) -> float:
        """Seconds until one more job is done (the run goes on after a fault)."""
        before = self.progress()["done"]
        return self.until("one more job done", lambda: self.progress()["done"] > before, timeout_s)


def test_2000_jobs_over_hosts_survive_faults(system: System) -> None:
    s = system
    s.build_network(agents=4)
    s.start_nats()
    postgres_url = s.start_postgres()
    s.start_services(postgres_url)
    markers = s.root / "markers"
    markers.mkdir()
    config = {
        "admission": s.admission_target(),
        "jobs": JOBS,
        "hosts": len(s.agents),
        "unit": "ml.g5.xlarge",
        "markers": str(markers),
        "job_seconds": 0.05,
        "chunk": 100,
        "window": 400,
        "timeout_s": RUN_TIMEOUT_S,
        "progress": str(s.root / "progress.json"),
        "result": str(s.root / "result.json"),
    }
    run = Run(s, Path(str(config["progress"])), s.run_driver(config))
    figures: dict[str, str] = {}

    # Phase 0: no fault. Leadership must hold under this load.
    run.until_done(PHASE_JOBS)
    no_fault_gains = sum(1 for _, _, kind in s.lease_events() if kind == "gained")
    figures["lease moves with no fault"] = str(no_fault_gains - 1)

    # 1. kill -9 of the NATS node leading the stream (a leader election follows),
    #    restarted 3 s later.
    assert s.nats is not None
    node = s.stream_leader("QM")
    assert node is not None, "the stream has no leader"
    killed_at = time.time()
    faults = [("NATS stream leader kill", killed_at)]
    s.nats.kill(node)
    run.until("a new stream leader", lambda: s.stream_leader("QM") not in (None, node))
    figures["NATS stream leader kill -> new leader (probed, ~1 s resolution)"] = (
        f"{time.time() - killed_at:.1f}s"
    )
    figures["NATS stream leader kill: next job done after"] = f"{run.next_progress():.2f}s"
    s.nats.start_node(node)
    run.until_done(2 * PHASE_JOBS)

    # 2. kill -9 of the scheduler leading the queue; restarted 2 s later.
    leader = s.queue_leader()
    assert leader is not None, "no scheduler leads the queue"
    killed_at = time.time()
    faults.append(("scheduler leader kill", killed_at))
    s.procs.kill(leader)
    other = "sch2" if leader == "sch1" else "sch1"

    def standby_gains() -> list[float]:
        events = s.lease_events()
        return [at for at, n, k in events if at > killed_at and (n, k) == (other, "gained")]

    run.until("the standby leads", lambda: bool(standby_gains()))
    gained = min(standby_gains())
    figures["scheduler leader kill -> standby leads"] = f"{gained - killed_at:.2f}s"
    figures["scheduler leader kill: next job done after"] = f"{run.next_progress():.2f}s"
    time.sleep(max(0.0, 2 - (time.time() - killed_at)))
    s.procs.restart(leader)
    run.until_done(3 * PHASE_JOBS)

    # 3. kill -9 of an admission replica (the first address: the one gRPC picks).
    faults.append(("admission kill", time.time()))
    s.procs.kill("adm1")
    figures["admission kill: next job done after"] = f"{run.next_progress():.2f}s"
    time.sleep(2)
    s.procs.restart("adm1")
    run.until_done(4 * PHASE_JOBS)

    # 4. kill -9 of a node agent; its job runs on (re-adopted after the restart).
    faults.append(("node agent kill", time.time()))
    s.procs.kill("h2")
    time.sleep(2)
    s.procs.restart("h2")
    figures["node agent kill: next job done after"] = f"{run.next_progress():.2f}s"
    run.until_done(5 * PHASE_JOBS)

    # 5. cut h3's link right after a job starts there, for longer than the timeout.
    cut = s.hosts["h3"]
    started_before = {p.name for p in markers.glob("*.h3.*")}
    run.until("a job starts on h3", lambda: bool(set(_names(markers, "h3")) - started_before))
    s.net.cut(cut)
    cut_at = time.time()
    faults.append(("link cut", cut_at))
    time.sleep(s.timing.heartbeat_timeout_s + 5)
    s.net.heal(cut)
    healed_at = time.time()

    run.until("the driver is done", lambda: run.driver.poll() is not None, RUN_TIMEOUT_S)
    assert run.driver.returncode == 0, s.procs.programs["driver"].log_file.read_text()[-3000:]
    result = json.loads(Path(str(config["result"])).read_text())
    jobs: dict[str, dict[str, Any]] = result["jobs"]

    # ---- 0 lost, all terminal, no attempt used -----------------------------------
    assert len(jobs) == JOBS, f"{JOBS - len(jobs)} submitted jobs missing"
    statuses = Counter(job["status"] for job in jobs.values())
    assert statuses == {"SUCCEEDED": JOBS}, f"not all succeeded: {statuses}"

    # ---- 0 run twice: one run per (job, attempt), on that attempt's host --------
    runs: dict[tuple[str, int], list[str]] = defaultdict(list)
    for marker in markers.iterdir():
        job_id, attempt_no, host, _pid = marker.name.rsplit(".", 3)
        runs[(job_id, int(attempt_no))].append(host)
    twice = {key: hosts for key, hosts in runs.items() if len(hosts) > 1}
    assert not twice, f"attempts run more than once: {list(twice.items())[:5]}"
    by_id = {job["job_id"]: job for job in jobs.values()}
    assert {job_id for job_id, _ in runs} == set(by_id), "a job succeeded without running"
    for (job_id, attempt), (host,) in runs.items():
        attempts = by_id[job_id]["attempts"]
        assert host in attempts[attempt - 1]["hosts"], f"{job_id} #{attempt} ran off its hosts"

    # ---- the cut host's job moved, and the cut host did not run it again ---------
    moved = {
        job_id: job
        for job_id, job in by_id.items()
        if any("h3 lost" in a["status_reason"] for a in job["attempts"])
    }
    assert moved, "the job on the cut host was not moved"
    for job_id, job in moved.items():
        last = job["attempts"][-1]
        assert "h3" not in last["hosts"], f"{job_id} finished on the cut host"
        on_cut = [a for (j, a), (h,) in runs.items() if j == job_id and h == "h3"]
        assert len(on_cut) <= 1, f"{job_id} ran on h3 again after the link came back"
    multi = {j: job for j, job in by_id.items() if len(job["attempts"]) > 1}
    other_moves = {j: job["attempts"][0]["status_reason"] for j, job in multi.items()}
    other_moves = {j: why for j, why in other_moves.items() if j not in moved}

    # ---- figures ----------------------------------------------------------------
    elapsed = result["finished"] - result["began"]
    gains = [(at, n) for at, n, k in s.lease_events() if k == "gained"]
    figures["jobs"] = f"{JOBS} in {elapsed:.1f}s = {JOBS / elapsed:.1f} jobs/s (faults included)"
    figures["lease moves, whole run"] = str(len(gains) - 1)
    figures["link cut"] = (
        f"{healed_at - cut_at:.1f}s; jobs moved off h3: {len(moved)}; "
        f"runs on h3 after heal: {_runs_after(markers, 'h3', healed_at)}"
    )
    figures["jobs with more than one attempt, other causes"] = (
        f"{len(other_moves)} {sorted(set(other_moves.values()))[:3]}"
    )
    retries = _driver_retries(s.procs.programs["driver"].log_file)
    ends = [at for _, at in faults[1:]] + [result["finished"]]
    for (name, began), end in zip(faults, ends, strict=True):
        moves = sum(1 for at, _ in gains if began <= at < end)
        calls = sum(1 for at in retries if began <= at < end)
        figures[f"{name}: lease moves / client calls retried"] = f"{moves} / {calls}"
    print("\nmulti-host run:")
    for name, value in figures.items():
        print(f"  {name}: {value}")
    (s.root / "passed").touch()


def _driver_retries(log_file: Path) -> list[float]:
    """When the driver retried a call (a replica was down), from its log."""
    found = []
    for line in log_file.read_text(errors="replace").splitlines():
        if line.endswith("retrying"):
            found.append(float(line.split(" ", 1)[0]))
    return found


def _names(markers: Path, host: str) -> list[str]:
    return [p.name for p in markers.glob(f"*.{host}.*")]


def _runs_after(markers: Path, host: str, at: float) -> int:
    return sum(1 for p in markers.glob(f"*.{host}.*") if p.stat().st_mtime > at)
