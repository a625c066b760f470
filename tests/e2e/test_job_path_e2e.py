"""`qm up`'s process runtime: jobs get the agent's PATH (or `--job-path`), and a job with
no command is refused at submit with INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
import pytest
from conftest import StackFactory, client_for
from scenario import UNIT, setup_queue

from quartermaster.client import (
    Compute,
    ModelTrainer,
    QuartermasterError,
    SourceCode,
    training_job,
)
from quartermaster_stack.settings import StackSettings

ENTRYPOINT = "service_request_payload.AlgorithmSpecification.ContainerEntrypoint"


def test_the_job_path_defaults_to_the_node_agents_setting_then_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", "/opt/venv/bin:/usr/bin:/bin")
    monkeypatch.delenv("QM_NODE_JOB_PATH", raising=False)
    assert StackSettings().job_path == "/opt/venv/bin:/usr/bin:/bin"
    monkeypatch.setenv("QM_NODE_JOB_PATH", "/jobs/bin:/bin")
    assert StackSettings().job_path == "/jobs/bin:/bin"


def test_jobs_find_programs_on_the_job_path(make_stack: StackFactory, tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    program = tools / "hello-qm"
    program.write_text('#!/bin/sh\necho "hello from $0"\n')
    program.chmod(0o755)
    stack = make_stack(nodes=1, job_path=f"{tools}:{os.defpath}")
    with client_for(stack) as c:
        queue = setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
        trainer = ModelTrainer(
            source_code=SourceCode(command="hello-qm"),
            base_job_name="on-path",
            compute=Compute(instance_type=UNIT),
        )
        job = queue.submit(trainer, None, quota_share_name="A")
        detail = job.wait(timeout=60)
        assert detail["status"] == "SUCCEEDED", detail
        assert job.get_model_trainer().base_job_name == "on-path"  # the SDK's way back
        missing = queue.submit(
            training_job(command=["no-such-program-qm"], instance_type=UNIT),
            None,
            "missing",
            quota_share_name="A",
        )
        failed = missing.wait(timeout=60)
        assert failed["status"] == "FAILED"
        assert "command not found: no-such-program-qm" in failed["statusReason"], failed


def test_a_job_may_set_its_own_path(make_stack: StackFactory, tmp_path: Path) -> None:
    tools = tmp_path / "own-tools"
    tools.mkdir()
    program = tools / "own-qm"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    stack = make_stack(nodes=1, job_path=os.defpath)
    with client_for(stack) as c:
        queue = setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
        payload = training_job(
            command=["own-qm"], instance_type=UNIT, environment={"PATH": f"{tools}:{os.defpath}"}
        )
        job = queue.submit(payload, None, "own-path", quota_share_name="A")
        assert job.wait(timeout=60)["status"] == "SUCCEEDED"


def test_a_job_without_a_command_is_refused_naming_the_field(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=1)
    with client_for(stack) as c:
        queue = setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
        for submit in (
            lambda: queue.submit(
                training_job(instance_type=UNIT),
                None,
                "no-command",
                None,
                None,
                None,
                None,
                None,
                "A",
            ),
            lambda: queue.dry_run(
                training_job(instance_type=UNIT), job_name="x", quota_share_name="A"
            ),
        ):
            with pytest.raises(QuartermasterError) as refused:
                submit()
            assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT
            assert refused.value.field == ENTRYPOINT
            assert ENTRYPOINT in refused.value.details
        assert c.list_jobs("q", all_statuses=True) == []
