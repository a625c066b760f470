"""`qm-node-agent --log-format json`: every line of the process is one JSON object."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from node_agent_harness import Cluster, payload

from quartermaster.core import JobStatus
from quartermaster.embedded import EmbeddedNats
from quartermaster.telemetry.logs import KEYS


async def test_the_agent_logs_json_lines_with_its_host_and_the_jobs_id(
    cluster: Cluster, nats_server: EmbeddedNats
) -> None:
    env = cluster.process_env("h1", nats_server.url)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "qm_node_agent",
        "--log-format",
        "json",
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    read: list[bytes] = []
    try:
        await cluster.until_host("h1")
        await cluster.run("logged", payload("exit 0"))
        await cluster.until_status("logged", JobStatus.SUCCEEDED)
        # The agent logs its report once the ack is back, which may come after the log
        # holds the report (and the status above): a stop before then cut the line.
        assert proc.stderr is not None
        async with asyncio.timeout(10):
            while not read or b"reported JobSucceeded" not in read[-1]:
                line = await proc.stderr.readline()
                if not line:
                    break
                read.append(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(proc.communicate(), 10)
    stderr = b"".join(read) + rest
    assert proc.returncode == 0, stderr.decode()
    lines = [json.loads(line) for line in stderr.decode().splitlines()]
    assert lines and all(set(KEYS) <= set(line) for line in lines)
    assert {line["service"] for line in lines} == {"qm-node-agent"}
    assert {line["host"] for line in lines} == {"h1"}
    about_job = [line for line in lines if line["job_id"] == "logged"]
    assert any("reported JobSucceeded" in str(line["message"]) for line in about_job)


async def test_a_bad_log_format_setting_is_named() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "qm_node_agent",
        env={"PATH": os.environ["PATH"], "QM_NODE_LOG_FORMAT": "xml"},
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 2
    assert "QM_NODE_" in stderr.decode() and "log_format" in stderr.decode()
