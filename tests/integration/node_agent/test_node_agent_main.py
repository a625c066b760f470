"""`python -m qm_node_agent` configured by QM_NODE_* variables: registers, and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from node_agent_harness import Cluster, payload, wait_for_file

from quartermaster import events as ev
from quartermaster.bus.liveness import LivenessWatch
from quartermaster.core import JobStatus
from quartermaster.embedded import EmbeddedNats


async def test_the_agent_process_registers_and_stops_cleanly_on_sigterm(
    cluster: Cluster, nats_server: EmbeddedNats
) -> None:
    env = cluster.process_env("proc-1", nats_server.url, QM_NODE_HEARTBEAT_SECONDS="0.2")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "qm_node_agent", env=env, stderr=asyncio.subprocess.PIPE
    )
    watch = LivenessWatch(cluster.log.nc, cluster.log.js, cluster.log.stream)
    await watch.start()
    try:
        await cluster.until_host("proc-1")
        await cluster.until("a heartbeat", lambda: watch.last_beat("proc-1") is not None)
    finally:
        await watch.stop()
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 0, stderr.decode()
    assert "host=proc-1 stopped" in stderr.decode()
    assert (cluster.tmp / "data" / "attempts").is_dir()


async def test_missing_settings_exit_with_the_variable_named() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "qm_node_agent",
        env={"PATH": os.environ["PATH"]},
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 10)

    assert proc.returncode == 2
    assert "QM_NODE_HOST_ID is required" in stderr.decode()


async def test_a_job_outlives_a_kill_9_of_the_agent_and_is_re_adopted_once(
    cluster: Cluster, nats_server: EmbeddedNats
) -> None:
    """The attempt record (a slot, fdatasynced) is read back by the next agent process:
    the job is neither launched again nor lost."""
    env = cluster.process_env("proc-1", nats_server.url)
    launches, go = cluster.tmp / "launches", cluster.tmp / "go"
    script = f"echo launched >> {launches}; while [ ! -e {go} ]; do sleep 0.05; done; exit 0"

    async def agent() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "qm_node_agent", env=env, stderr=asyncio.subprocess.DEVNULL
        )

    first = await agent()
    try:
        await cluster.until_host("proc-1")
        await cluster.submit("long", payload(script))
        await cluster.dispatch("long", ("proc-1",))
        await wait_for_file(launches)
        await cluster.until_status("long", JobStatus.RUNNING)
    finally:
        first.kill()  # SIGKILL: no clean stop, the store is never closed
        await first.wait()
    second = await agent()
    try:
        await cluster.until(
            "re-registered",
            lambda: sum(isinstance(e, ev.HostRegistered) for _, e in cluster.reports) == 2,
        )
        go.touch()
        job = await cluster.until_status("long", JobStatus.SUCCEEDED)
    finally:
        second.send_signal(signal.SIGTERM)
        await asyncio.wait_for(second.wait(), 10)
    assert launches.read_text() == "launched\n"
    assert len(cluster.reported("long", ev.JobRunning)) == 1
    assert job.attempts[-1].exit_code == 0
