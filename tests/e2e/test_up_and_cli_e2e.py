"""`qm up` semantics on embedded servers (restart on the same data dir) and the `qm` CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenario import LONG, UNIT, setup_queue, shell, status, until

from quartermaster.cli.main import main as qm
from quartermaster.client import Quartermaster, TrainingQueuedJob
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread


def test_restart_on_the_same_data_dir_resumes_with_nothing_lost(tmp_path: Path) -> None:
    settings = StackSettings(
        data_dir=tmp_path / "data",
        nodes=1,
        grpc_port=0,
        stop_grace_seconds=2,
        heartbeat_seconds=1,
        tick_seconds=1,
    )
    with StackThread(settings) as stack:
        c = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
        queue = setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
        running = queue.submit(shell(LONG), job_name="running", quota_share_name="A")
        waiting = queue.submit(shell("exit 0"), job_name="waiting", quota_share_name="A")
        until("running", lambda: status(c, running.job_id) == "RUNNING")
        c.close()
    with StackThread(settings) as stack:  # embedded NATS and Postgres come back on their data
        c = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
        assert status(c, running.job_id) == "RUNNING"  # re-adopted by the restarted agent
        assert status(c, waiting.job_id) == "RUNNABLE"
        TrainingQueuedJob(running.job_id, "running", client=c).terminate("done")
        until("waiting ran", lambda: status(c, waiting.job_id) == "SUCCEEDED", timeout=60)
        assert len(c.describe_job(running.job_id).attempts) == 1
        c.close()


def test_cli_covers_the_rpcs(make_stack, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    stack = make_stack(nodes=1)
    a = ["--address", stack.address, "--credentials", str(stack.credentials_dir)]
    assert qm([*a, "env", "create", "env", "--capacity", f"{UNIT}=1"]) == 0
    assert qm([*a, "policy", "create", "fifo"]) == 0
    assert qm([*a, "queue", "create", "q", "--env", "env", "--policy", "fifo"]) == 0
    assert qm([*a, "share", "create", "q", "A", "--capacity", f"{UNIT}=1"]) == 0
    capsys.readouterr()
    assert (
        qm(
            [
                *a,
                "job",
                "submit",
                "q",
                "--share",
                "A",
                "--name",
                "hello",
                "--",
                "sh",
                "-c",
                "exit 0",
            ]
        )
        == 0
    )
    job_id = capsys.readouterr().out.strip()
    assert qm([*a, "job", "wait", job_id, "--timeout", "60"]) == 0
    assert capsys.readouterr().out.strip() == "SUCCEEDED"
    assert qm([*a, "job", "list", "q"]) == 0
    table = capsys.readouterr().out
    assert "hello" in table and "SUCCEEDED" in table
    assert qm([*a, "nodes", "list"]) == 0
    assert "node-1" in capsys.readouterr().out
    for args in (
        ["share", "list", "q"],
        ["queue", "snapshot", "q"],
        ["queue", "list"],
        ["env", "list"],
        ["pools", "list"],
        ["share", "describe", "q", "A"],
    ):
        assert qm([*a, *args]) == 0, args
    assert qm([*a, "share", "describe", "q", "nope"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err
