"""`python -m qm_node_agent` configured by QM_NODE_* variables: registers, and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from node_agent_harness import Cluster

from quartermaster.bus.liveness import LivenessWatch
from quartermaster.embedded import EmbeddedNats


async def test_the_agent_process_registers_and_stops_cleanly_on_sigterm(
    cluster: Cluster, nats_server: EmbeddedNats
) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "QM_NODE_HOST_ID": "proc-1",
        "QM_NODE_INSTANCE_TYPE": "ml.g5.xlarge",
        "QM_NODE_DATA_DIR": str(cluster.tmp / "data"),
        "QM_NODE_GPU_COUNT": "0",
        "QM_NODE_NATS_URL": nats_server.url,
        "QM_NODE_STREAM": cluster.log.stream,
        "QM_NODE_SUBJECT_PREFIX": cluster.log.prefix,
        "QM_NODE_HEARTBEAT_SECONDS": "0.2",
    }
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
