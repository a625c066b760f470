"""The node agent with the process runtime, driven through a real event log.

Each test starts an agent for host h1, appends what admission and the
scheduler would (job submitted, dispatched to h1, preempted, ...), and checks
what the agent reports and what the job itself saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from node_agent_harness import Cluster, payload, process_alive, wait_for_file

from qm_node_agent import attempt
from qm_node_agent.attempt import LOST_REASON, TIMEOUT_REASON
from qm_node_agent.layout import Layout
from qm_node_agent.records import AttemptRecord, AttemptStore
from qm_node_agent.reporter import Reporter
from quartermaster import events as ev
from quartermaster.bus.liveness import LivenessWatch
from quartermaster.core import HostStatus, JobStatus
from quartermaster.core.model import WarmPoolStatus
from quartermaster.eventlog import subjects

LOOP = "while true; do sleep 0.05; done"


async def test_a_job_that_exits_0_succeeds(cluster: Cluster) -> None:
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        host = cluster.follower.state.hosts["h1"]
        assert (host.unit, host.gpu_count, host.address) == ("ml.g5.xlarge", 0, "127.0.0.1")

        await cluster.run("ok", payload("echo hello"))

        job = await cluster.until_status("ok", JobStatus.SUCCEEDED)
    assert job.attempts[-1].exit_code == 0
    kinds = [type(event) for event in cluster.reported("ok")]
    assert kinds == [ev.JobStarting, ev.JobRunning, ev.JobSucceeded]
    subject = subjects.reports("h1", cluster.log.prefix)
    assert {s for s, e in cluster.reports if getattr(e, "job_id", None) == "ok"} == {subject}


async def test_an_end_the_log_holds_before_its_ack_returns_is_no_stop(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The log says the attempt is over on the host once the final report is folded,
    mostly before the report's ack is back: that is no stop of the ended job (none is
    requested or logged), and its outcome stands."""
    report = Reporter.report
    folded_first = asyncio.Event()

    async def ack_after_the_fold(self: Reporter, event: Any, trace: str | None = None) -> int:
        seq = await report(self, event, trace)
        if isinstance(event, ev.JobSucceeded):
            await cluster.until_status(event.job_id, JobStatus.SUCCEEDED)
            await asyncio.sleep(0.3)  # the agent's own view of the end comes meanwhile
            folded_first.set()
        return seq

    monkeypatch.setattr(Reporter, "report", ack_after_the_fold)
    caplog.set_level(logging.INFO, logger="qm_node_agent")
    settings = cluster.settings()
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("done", payload(entrypoint=["true"]))
        await asyncio.wait_for(folded_first.wait(), 15)
        await cluster.until(
            "the attempt is forgotten",
            lambda: not AttemptStore(Layout(settings.data_dir)).load_all(),
        )
    lines = [r.getMessage() for r in caplog.records if "job_id=done" in r.getMessage()]
    assert any("reported JobSucceeded" in line for line in lines)
    assert not [line for line in lines if "stop requested" in line]
    assert [type(e) for e in cluster.reported("done")][-1] is ev.JobSucceeded


async def test_heartbeats_keep_coming_to_the_liveness_bucket_not_the_log(cluster: Cluster) -> None:
    watch = LivenessWatch(cluster.log.nc, cluster.log.js, cluster.log.stream)
    await watch.start()
    try:
        async with cluster.agent(cluster.settings(heartbeat_seconds=0.1)):
            await cluster.until_host()
            registered = cluster.follower.state.hosts["h1"].last_heartbeat
            await cluster.until("a heartbeat", lambda: watch.last_beat("h1") is not None)
            first = watch.last_beat("h1")
            assert first is not None and first >= registered
            await cluster.until("a newer heartbeat", lambda: (watch.last_beat("h1") or 0) > first)
    finally:
        await watch.stop()
    assert watch.ready
    assert not any(isinstance(e, ev.HostHeartbeat) for _, e in cluster.reports)


async def test_exit_3_fails_with_an_algorithm_error_and_the_log_tail(cluster: Cluster) -> None:
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        script = "for i in $(seq 1 400); do echo noise-$i; done; echo 'loss is nan' >&2; exit 3"
        await cluster.run("bad", payload(script))

        failed = await cluster.until_reported("bad", ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.ALGORITHM_ERROR
    assert failed.reason == "AlgorithmError: exit code 3"
    assert failed.exit_code == 3
    assert failed.log_tail.endswith("noise-400\nloss is nan\n")
    assert len(failed.log_tail.encode()) <= 2048
    job = cluster.job("bad")
    assert job.failure_reason == "AlgorithmError: exit code 3"
    assert job.attempts[-1].log_tail == failed.log_tail


async def test_the_job_sees_its_environment_and_runs_in_its_work_dir(cluster: Cluster) -> None:
    out = cluster.tmp / "env.json"
    settings = cluster.settings(gpu_count=2)
    script = (
        f"env > {out}.tmp; pwd >> {out}.pwd; cp /opt/ml/input/config/resourceconfig.json "
        f"{out}.rc; getent hosts algo-1 > {out}.hosts; mv {out}.tmp {out}"
    )
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("envy", payload(script, env={"LEARNING_RATE": "0.1", "SM_HOSTS": "x"}))
        await cluster.until_status("envy", JobStatus.SUCCEEDED)

    seen = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    cache = settings.data_dir / "warmpool-cache" / "envy"
    assert seen["LEARNING_RATE"] == "0.1"
    assert json.loads(seen["SM_HOSTS"]) == ["algo-1"]  # ours win over the payload's
    assert seen["SM_CURRENT_HOST"] == "algo-1"
    assert seen["QM_HOST"] == "h1"
    assert seen["TRAINING_JOB_NAME"] == "envy-envy-1"
    assert seen["TRAINING_JOB_ARN"].endswith(":training-job/envy-envy-1")
    # Its own /opt/ml (a mount namespace of its own) and /etc/hosts naming its gang.
    assert json.loads(Path(f"{out}.rc").read_text())["current_host"] == "algo-1"
    assert Path(f"{out}.hosts").read_text().split()[-1] == "algo-1"
    assert not Path("/opt/ml/input/config/resourceconfig.json").exists()
    assert seen["SM_CURRENT_INSTANCE_TYPE"] == "ml.g5.xlarge"
    assert seen["SM_NUM_GPUS"] == "2"
    assert seen["CUDA_VISIBLE_DEVICES"] == seen["NVIDIA_VISIBLE_DEVICES"] == "0,1"
    assert seen["SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"] == str(cache)
    assert (seen["QM_JOB_ID"], seen["QM_ATTEMPT"]) == ("envy", "1")
    assert "QM_NODE_HOST_ID" not in seen and "NATS_URL" not in seen
    assert Path(f"{out}.pwd").read_text().strip() == str(settings.data_dir / "jobs" / "envy-1")
    assert cluster.follower.state.hosts["h1"].gpu_count == 2


async def test_a_command_that_does_not_exist_is_a_client_error(cluster: Cluster) -> None:
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        await cluster.run("typo", payload(entrypoint=["no-such-trainer", "--epochs", "3"]))

        failed = await cluster.until_reported("typo", ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.CLIENT_ERROR
    assert failed.reason == "ClientError: command not found: no-such-trainer"
    assert not cluster.reported("typo", ev.JobRunning)


async def test_a_command_removed_after_it_was_found_is_still_a_client_error(
    cluster: Cluster,
) -> None:
    """The agent remembers commands it found on the job PATH; the wrapper catches one
    removed since (exit 127 of a missing command) as the same client error."""
    tools = cluster.tmp / "tools"
    tools.mkdir()
    trainer = tools / "short-lived-trainer"
    trainer.write_text("#!/bin/sh\nexit 0\n")
    trainer.chmod(0o755)
    async with cluster.agent(cluster.settings(job_path=f"{tools}:/usr/bin:/bin")):
        await cluster.until_host()
        await cluster.run("found", payload(entrypoint=["short-lived-trainer"]))
        await cluster.until_reported("found", ev.JobSucceeded)
        trainer.unlink()
        await cluster.run("gone", payload(entrypoint=["short-lived-trainer"]))

        failed = await cluster.until_reported("gone", ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.CLIENT_ERROR
    assert failed.reason == "ClientError: command not found: short-lived-trainer"


@pytest.mark.parametrize("starting_after_s", [60.0, 0.0])
async def test_a_quick_start_reports_starting_with_running_a_slow_one_before(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, starting_after_s: float
) -> None:
    """One message with both when the start is quicker than `STARTING_AFTER_S`; else
    JobStarting on its own first (a slow start shows STARTING while it lasts)."""
    monkeypatch.setattr(attempt, "STARTING_AFTER_S", starting_after_s)
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        await cluster.run("quick", payload(entrypoint=["true"]))
        await cluster.until_reported("quick", ev.JobSucceeded)
    kinds = [k for k in cluster.report_messages if set(k) & {ev.JobStarting, ev.JobRunning}]
    if starting_after_s:
        assert kinds == [[ev.JobStarting, ev.JobRunning]]
    else:
        assert kinds == [[ev.JobStarting], [ev.JobRunning]]
    assert cluster.job("quick").status == "SUCCEEDED"


async def test_no_room_for_the_attempt_is_an_infrastructure_error_and_starts_nothing(
    cluster: Cluster,
) -> None:
    """A file in the way of the work dir fails the attempt as the host's fault before
    anything runs."""
    settings = cluster.settings()
    marker = cluster.tmp / "ran"
    async with cluster.agent(settings):
        await cluster.until_host()
        Layout(settings.data_dir).work_dir("roomless", 1).write_text("in the way")
        await cluster.run("roomless", payload(f"touch {marker}"))

        failed = await cluster.until_reported("roomless", ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.INFRASTRUCTURE_ERROR
    assert failed.reason.startswith("InfrastructureError: ")
    assert not cluster.reported("roomless", ev.JobRunning)
    assert not marker.exists()


async def test_a_log_that_cannot_be_opened_is_an_infrastructure_error_and_runs_nothing(
    cluster: Cluster,
) -> None:
    """The wrapper opens the job's log: a folder in its way fails the attempt as the
    host's fault, and the job's command never runs."""
    settings = cluster.settings()
    marker = cluster.tmp / "ran"
    async with cluster.agent(settings):
        await cluster.until_host()
        Layout(settings.data_dir).log_file("logless", 1).mkdir(parents=True)
        await cluster.run("logless", payload(f"touch {marker}"))

        failed = await cluster.until_reported("logless", ev.JobFailed)
    assert failed.failure_class is ev.FailureClass.INFRASTRUCTURE_ERROR
    assert failed.reason == "InfrastructureError: cannot open the job's log file"
    assert not marker.exists()


async def test_the_record_is_written_before_the_start_and_flushed_before_running(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch does not wait for the record's flush (they overlap), but the job's
    record is in the file before it starts, and JobRunning waits for the flush."""
    flushed: list[float] = []
    sync = AttemptStore.sync

    def slow_sync(store: AttemptStore) -> None:
        time.sleep(0.3)
        sync(store)
        flushed.append(time.time())

    monkeypatch.setattr(AttemptStore, "sync", slow_sync)
    settings = cluster.settings()
    records = Layout(settings.data_dir).records_file
    started, seen = cluster.tmp / "started", cluster.tmp / "seen"
    script = f"date +%s.%N > {started}; grep -c overlap {records} > {seen}; sleep 0.5"
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("overlap", payload(script))
        await cluster.until_status("overlap", JobStatus.SUCCEEDED)
    running = cluster.reported("overlap", ev.JobRunning)[0]
    assert seen.read_text().strip() != "0"  # the record was there when the job began
    launch_flush = min(t for t in flushed if t >= float(started.read_text()))
    assert float(started.read_text()) < launch_flush  # started during the flush
    assert running.at >= launch_flush  # reported once the record was durable


async def test_an_agent_stopped_during_the_flush_leaves_the_job_to_the_next_one(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent stops while a new record's flush is in flight: the started job goes
    on (no stop), and the next agent adopts it from the written record; it ran once."""
    sync = AttemptStore.sync

    def slow_sync(store: AttemptStore) -> None:
        time.sleep(0.5)
        sync(store)

    monkeypatch.setattr(AttemptStore, "sync", slow_sync)
    launches, go = cluster.tmp / "launches", cluster.tmp / "go"
    script = f"echo launched >> {launches}; while [ ! -e {go} ]; do sleep 0.05; done"
    settings = cluster.settings()
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("midflush", payload(script))
        await wait_for_file(launches)  # started; the flush still sleeps
    assert not cluster.reported("midflush", ev.JobRunning)
    async with cluster.agent(settings):
        job = await cluster.until_status("midflush", JobStatus.RUNNING)
        go.touch()
        job = await cluster.until_status("midflush", JobStatus.SUCCEEDED)
    assert launches.read_text() == "launched\n"
    assert job.attempts[-1].exit_code == 0


async def test_a_record_that_cannot_be_flushed_undoes_the_start(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flush of a new record fails (a disk error): the job, started meanwhile, is
    stopped, and is never reported RUNNING."""
    launched, survived = cluster.tmp / "launched", cluster.tmp / "survived"

    def failing_sync(store: AttemptStore) -> None:
        time.sleep(0.2)  # the job is started by now
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(AttemptStore, "sync", failing_sync)
    settings = cluster.settings()
    script = f"touch {launched}; sleep 1; touch {survived}"
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("unflushed", payload(script))
        await wait_for_file(launched)
        await cluster.until(
            "the start undone", lambda: not cluster.reported("unflushed", ev.JobRunning)
        )
        await asyncio.sleep(1.5)
    assert not survived.exists()
    assert not cluster.reported("unflushed", ev.JobRunning)


async def test_the_outcome_is_reported_while_it_is_saved(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final report does not wait for the outcome's flush (the next job's dispatch
    then does not either); the attempt is over for the agent once both are done."""
    saved: list[float] = []
    save = AttemptStore.save

    def slow_save(store: AttemptStore, record: AttemptRecord) -> None:
        if record.outcome is not None:
            time.sleep(1.0)
        save(store, record)
        if record.outcome is not None:
            saved.append(time.time())

    monkeypatch.setattr(AttemptStore, "save", slow_save)
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        await cluster.run("quick", payload("true"))
        await cluster.until_reported("quick", ev.JobSucceeded)
        assert saved == []  # in the log while the save still sleeps
        await cluster.until("saved", lambda: bool(saved))


async def test_an_outcome_reported_but_not_saved_is_settled_after_a_restart(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The outcome's save fails after its report (as if the agent died between them):
    the next agent adopts the record left without an outcome, finds the part ended by
    its exit file, and settles it; what it reports changes nothing in the log (its
    final report again, deduplicated, or a stop confirmation if the host's view already
    showed the job over). The job succeeded once, in one attempt."""
    save = AttemptStore.save

    def failing_save(store: AttemptStore, record: AttemptRecord) -> None:
        if record.outcome is not None:
            time.sleep(0.3)
            raise OSError(5, "Input/output error")
        save(store, record)

    settings = cluster.settings()
    with monkeypatch.context() as patched:
        patched.setattr(AttemptStore, "save", failing_save)
        async with cluster.agent(settings):
            await cluster.until_host()
            await cluster.run("unsaved", payload("true"))
            await cluster.until_status("unsaved", JobStatus.SUCCEEDED)
    (left,) = AttemptStore(Layout(settings.data_dir)).load_all()
    assert left.job_id == "unsaved" and left.outcome is None
    async with cluster.agent(settings) as agent:
        await cluster.until("settled and forgotten", lambda: not agent._records)
    job = cluster.job("unsaved")
    assert job.status is JobStatus.SUCCEEDED and len(job.attempts) == 1
    assert job.attempts[-1].exit_code == 0


async def test_preemption_sends_sigterm_to_the_job_and_confirms_the_stop(cluster: Cluster) -> None:
    marker = cluster.tmp / "terminated"
    ready = cluster.tmp / "ready"
    script = f"trap 'echo term > {marker}; exit 143' TERM; touch {ready}; {LOOP}"
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        await cluster.run("victim", payload(script))
        await wait_for_file(ready)

        await cluster.preempt("victim")

        confirmed = await cluster.until_reported("victim", ev.JobStopConfirmed)
        job = await cluster.until_status("victim", JobStatus.RUNNABLE)
    assert marker.read_text() == "term\n"
    assert confirmed.exit_code == 143
    assert job.preempted_count == 1
    assert cluster.follower.state.hosts["h1"].holder is None
    assert not cluster.reported("victim", ev.JobSucceeded)


async def test_termination_stops_the_job_and_it_ends_failed(cluster: Cluster) -> None:
    ready = cluster.tmp / "ready"
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        await cluster.run("doomed", payload(f"touch {ready}; {LOOP}"))
        await wait_for_file(ready)

        await cluster.terminate("doomed", "no longer needed")

        confirmed = await cluster.until_reported("doomed", ev.JobStopConfirmed)
        await cluster.until("h1 freed", lambda: cluster.follower.state.hosts["h1"].holder is None)
    job = cluster.job("doomed")
    assert (job.status, job.status_reason, job.is_terminated) == (
        JobStatus.FAILED,
        "no longer needed",
        True,
    )
    assert confirmed.exit_code == 128 + signal.SIGTERM  # sh without a trap dies of SIGTERM


async def test_a_job_that_ignores_sigterm_is_killed_after_the_grace_period(
    cluster: Cluster,
) -> None:
    ready = cluster.tmp / "ready"
    async with cluster.agent(cluster.settings(stop_grace_seconds=1.0)):
        await cluster.until_host()
        await cluster.run("stubborn", payload(f"trap '' TERM; touch {ready}; {LOOP}"))
        await wait_for_file(ready)

        started = time.monotonic()
        await cluster.preempt("stubborn")
        confirmed = await cluster.until_reported("stubborn", ev.JobStopConfirmed)
        waited = time.monotonic() - started
    assert confirmed.exit_code == 128 + signal.SIGKILL
    assert 1.0 <= waited < 5.0


async def test_an_attempt_past_its_timeout_is_stopped_and_fails(cluster: Cluster) -> None:
    async with cluster.agent(cluster.settings(stop_grace_seconds=1.0)):
        await cluster.until_host()
        await cluster.run("slow", payload(f"echo working; {LOOP}"), timeout=1)

        failed = await cluster.until_reported("slow", ev.JobFailed, timeout=10)
    running = cluster.reported("slow", ev.JobRunning)[0]
    assert failed.reason == TIMEOUT_REASON
    assert failed.failure_class is ev.FailureClass.ALGORITHM_ERROR
    assert failed.exit_code == 128 + signal.SIGTERM
    assert "working" in failed.log_tail
    assert 1.0 <= failed.at - running.at < 3.0
    assert cluster.job("slow").failure_reason == TIMEOUT_REASON


async def test_a_stop_that_comes_before_the_launch_is_confirmed_without_a_launch(
    cluster: Cluster,
) -> None:
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        await cluster.submit("never", payload("touch should-not-run"))
        await cluster.decide(
            ev.JobDispatched(at=time.time(), job_id="never", attempt=1, hosts=("h1",)),
            ev.JobPreemptionRequested(
                at=time.time(), job_id="never", attempt=1, reason="reclaimed", for_job="x"
            ),
        )

        confirmed = await cluster.until_reported("never", ev.JobStopConfirmed)
        await cluster.until_status("never", JobStatus.RUNNABLE)
    assert confirmed.exit_code is None
    assert not cluster.reported("never", ev.JobStarting)


async def test_a_restarted_agent_re_adopts_the_running_attempt(cluster: Cluster) -> None:
    launches = cluster.tmp / "launches"
    go = cluster.tmp / "go"
    script = f"echo launched >> {launches}; while [ ! -e {go} ]; do sleep 0.05; done; exit 0"
    settings = cluster.settings()
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("long", payload(script))
        await wait_for_file(launches)
        await cluster.until_status("long", JobStatus.RUNNING)
    # The agent is gone; the job runs on.
    (record,) = AttemptStore(Layout(settings.data_dir)).load_all()
    assert record.pid is not None and Path(f"/proc/{record.pid}").exists()

    async with cluster.agent(settings):
        await cluster.until(
            "re-registered",
            lambda: sum(isinstance(e, ev.HostRegistered) for _, e in cluster.reports) == 2,
        )
        go.touch()
        job = await cluster.until_status("long", JobStatus.SUCCEEDED)

    assert launches.read_text() == "launched\n"
    assert len(cluster.reported("long", ev.JobStarting)) == 1
    assert len(cluster.reported("long", ev.JobRunning)) == 1
    assert job.attempts[-1].exit_code == 0


async def test_an_attempt_whose_record_holds_no_pid_yet_is_re_adopted_by_its_exit_file(
    cluster: Cluster,
) -> None:
    """JobRunning goes out while the pid is being saved: an agent that stopped in between
    finds the wrapper by the exit file its argv names, and neither relaunches nor loses it."""
    launches = cluster.tmp / "launches"
    go = cluster.tmp / "go"
    script = f"echo launched >> {launches}; while [ ! -e {go} ]; do sleep 0.05; done; exit 0"
    settings = cluster.settings()
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("nopid", payload(script))
        await wait_for_file(launches)
        await cluster.until_status("nopid", JobStatus.RUNNING)
    store = AttemptStore(Layout(settings.data_dir))
    (record,) = store.load_all()
    pid = record.pid
    # As if the agent had stopped before the second write.
    store.save(msgspec.structs.replace(record, pid=None, running_at=None))
    store.close()

    async with cluster.agent(settings):
        await cluster.until(
            "re-registered",
            lambda: sum(isinstance(e, ev.HostRegistered) for _, e in cluster.reports) == 2,
        )
        assert Path(f"/proc/{pid}").exists()
        go.touch()
        job = await cluster.until_status("nopid", JobStatus.SUCCEEDED)

    assert launches.read_text() == "launched\n"
    assert len(cluster.reported("nopid", ev.JobRunning)) == 1
    assert job.attempts[-1].exit_code == 0


async def test_an_attempt_lost_while_the_agent_was_down_fails_as_infrastructure(
    cluster: Cluster,
) -> None:
    ready = cluster.tmp / "ready"
    settings = cluster.settings()
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("gone", payload(f"touch {ready}; {LOOP}"))
        await wait_for_file(ready)
        await cluster.until_status("gone", JobStatus.RUNNING)
    (record,) = AttemptStore(Layout(settings.data_dir)).load_all()
    assert record.pid is not None
    os.killpg(record.pid, signal.SIGKILL)  # e.g. the machine rebooted
    await _until_dead(record.pid)

    async with cluster.agent(settings) as agent:
        failed = await cluster.until_reported("gone", ev.JobFailed)
        job = await cluster.until_status("gone", JobStatus.RUNNABLE)
        # Once the host's view shows it over (a view that only frees the host may be
        # held briefly for a dispatch: `host_relay.HOLD_S`).
        await cluster.until("the attempt forgotten", lambda: not agent._records)
    assert failed.failure_class is ev.FailureClass.INFRASTRUCTURE_ERROR
    assert failed.reason == LOST_REASON
    assert LOST_REASON in job.status_reason
    assert AttemptStore(Layout(settings.data_dir)).load_all() == []  # forgotten once folded


async def test_the_cache_survives_a_warm_pool_reuse_and_goes_with_the_pool(
    cluster: Cluster,
) -> None:
    settings = cluster.settings()
    cache = settings.data_dir / "warmpool-cache" / "first"
    seen = cluster.tmp / "seen"
    write = 'echo weights > "$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY/model"'
    read = f'cat "$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY/model" > {seen}'
    async with cluster.agent(settings):
        await cluster.until_host()
        await cluster.run("first", payload(write), keep_alive=600)
        await cluster.until_status("first", JobStatus.SUCCEEDED)
        await cluster.decide(
            ev.WarmPoolAvailable(
                at=time.time(),
                job_id="first",
                hosts=("h1",),
                expires_at=time.time() + 600,
                chain_id="first",
                chain_started_at=time.time(),
            )
        )
        assert (cache / "model").read_text() == "weights\n"

        await cluster.submit("second", payload(read), keep_alive=600)
        await cluster.dispatch("second", warm_pool="first")
        await cluster.until_status("second", JobStatus.SUCCEEDED)
        assert seen.read_text() == "weights\n"
        await cluster.decide(
            ev.WarmPoolAvailable(
                at=time.time(),
                job_id="second",
                hosts=("h1",),
                expires_at=time.time() + 600,
                chain_id="first",
                chain_started_at=time.time(),
            )
        )
        assert cache.exists()

        await cluster.decide(
            ev.WarmPoolTerminated(
                at=time.time(),
                job_id="second",
                reason=ev.WarmPoolTerminationReason.EXPIRED,
                billable_seconds=1,
            )
        )
        assert cluster.follower.state.pools["second"].status is WarmPoolStatus.TERMINATED
        await cluster.until("the cache is deleted", lambda: not cache.exists())


async def test_the_cache_is_deleted_when_an_attempt_ends_without_a_pool(cluster: Cluster) -> None:
    settings = cluster.settings()
    cache = settings.data_dir / "warmpool-cache" / "cold"
    async with cluster.agent(settings):
        await cluster.until_host()
        write = 'echo x > "$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY/f"; sleep 0.3'
        await cluster.run("cold", payload(write))
        await wait_for_file(cache / "f")
        await cluster.until_status("cold", JobStatus.SUCCEEDED)
        await cluster.until("the cache is deleted", lambda: not cache.exists())
        await cluster.until(
            "the attempt is forgotten",
            lambda: not AttemptStore(Layout(settings.data_dir)).load_all(),
        )
    assert not (settings.data_dir / "jobs" / "cold-1").exists()


async def test_caches_left_from_before_a_restart_and_of_each_attempt_are_deleted(
    cluster: Cluster,
) -> None:
    """The agent lists the cache folders once, then knows which its launches made: a
    leftover of an earlier run goes, and so do the caches of several attempts ending."""
    settings = cluster.settings()
    root = settings.data_dir / "warmpool-cache"
    (root / "leftover").mkdir(parents=True)
    async with cluster.agent(settings):
        await cluster.until_host()
        for name in ("c1", "c2", "c3"):
            await cluster.run(name, payload("true"))
            await cluster.until_status(name, JobStatus.SUCCEEDED)
        await cluster.until("every cache deleted", lambda: not any(root.iterdir()))


async def test_the_next_attempt_gets_the_emptied_work_dir_of_an_ended_one(
    cluster: Cluster,
) -> None:
    """An ended attempt's work dir and cache are emptied and kept, not deleted: the
    next attempt works in one of the same inodes (none freed and made per attempt),
    and sees nothing of the one before."""
    settings = cluster.settings()
    first, second = cluster.tmp / "first", cluster.tmp / "second"
    async with cluster.agent(settings):
        await cluster.until_host()
        cache = '"$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"'
        script = f"stat -c %i . {cache} > {first}; echo x > left-behind; echo y > {cache}/c"
        await cluster.run("one", payload(script))
        await cluster.until_status("one", JobStatus.SUCCEEDED)
        await cluster.until(
            "the attempt's files retired",
            lambda: not (settings.data_dir / "jobs" / "one-1").exists(),
        )
        await cluster.run("two", payload(f"{{ stat -c %i .; ls -A; }} > {second}"))
        await cluster.until_status("two", JobStatus.SUCCEEDED)
    (inode,) = second.read_text().split()  # and `ls -A` printed nothing
    assert inode in first.read_text().split()


async def test_a_host_declared_lost_while_its_agent_lives_registers_again(
    cluster: Cluster,
) -> None:
    async with cluster.agent(cluster.settings()):
        await cluster.until_host()
        await cluster.append(
            subjects.host_decisions(cluster.log.prefix),
            ev.HostLost(at=time.time(), host_id="h1", reason="heartbeat timeout"),
        )
        await cluster.until(
            "h1 healthy again",
            lambda: cluster.follower.state.hosts["h1"].status is HostStatus.HEALTHY,
        )


async def _until_dead(pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if not process_alive(pid):
            return
        time.sleep(0.02)


async def test_a_failure_on_one_host_stops_the_attempt_on_the_others(cluster: Cluster) -> None:
    ready = cluster.tmp / "ready-h2"
    script = (
        f'if [ "$QM_HOST" = h1 ]; then while [ ! -e {ready} ]; do sleep 0.05; done; '
        f"exit 3; else touch {ready}; {LOOP}; fi"
    )
    async with cluster.agent(cluster.settings("h1")), cluster.agent(cluster.settings("h2")):
        await cluster.until_host("h1")
        await cluster.until_host("h2")
        await cluster.submit("pair", payload(script))
        await cluster.decide(
            ev.JobDispatched(at=time.time(), job_id="pair", attempt=1, hosts=("h1", "h2"))
        )

        failed = await cluster.until_reported("pair", ev.JobFailed)
        confirmed = await cluster.until_reported("pair", ev.JobStopConfirmed)
        await cluster.until("the attempt is over", lambda: cluster.job("pair").awaiting_outcome)
    assert (failed.host, failed.exit_code) == ("h1", 3)
    assert (confirmed.host, confirmed.exit_code) == ("h2", 128 + signal.SIGTERM)
    assert cluster.job("pair").ended_hosts == ("h1", "h2")
