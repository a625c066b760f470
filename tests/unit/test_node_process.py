"""How `qm up --node-processes` starts an agent: its settings, and only they, by environment."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from qm_node_agent.settings import NodeSettings
from quartermaster.telemetry import LogFormat, TelemetrySettings, logs
from quartermaster_stack.node_process import NodeProcess


class Started:
    def __init__(self, argv: list[str], **options: Any) -> None:
        self.argv, self.options = argv, options
        self.pid = 4242


def test_an_agent_process_gets_its_settings_and_not_the_shells(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("QM_NODE_GPU_COUNT", "8")  # the stack's own shell; not the agent's
    monkeypatch.setenv("QM_NODE_RUNTIME", "docker")
    started: list[Started] = []
    monkeypatch.setattr(
        subprocess, "Popen", lambda argv, **o: started.append(Started(argv, **o)) or started[-1]
    )
    settings = NodeSettings(
        host_id="node-1", instance_type="ml.g5.xlarge", data_dir=tmp_path, address="127.0.0.1"
    )
    agent = NodeProcess.spawn(settings, lambda: True)
    try:
        (process,) = started
        env = process.options["env"]
        assert process.argv[1:] == ["-m", "qm_node_agent"]
        assert "QM_NODE_GPU_COUNT" not in env  # unset: detect, as in the stack's process
        assert env["QM_NODE_RUNTIME"] == "process"  # the stack's, not the shell's
        assert env["PATH"] == os.environ["PATH"]  # the rest of the environment is kept
        lifeline = int(env["QM_NODE_LIFELINE_FD"])
        assert process.options["pass_fds"] == (lifeline,)
        expected = dataclasses.replace(settings, lifeline_fd=lifeline)
        assert NodeSettings.from_env(env) == expected
    finally:
        os.close(agent._lifeline)


def test_an_agent_process_logs_as_the_stack_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`qm up` logs warnings up, maybe as JSON: its agents' processes do the same."""
    monkeypatch.setenv("QM_NODE_LOG_LEVEL", "DEBUG")  # the shell's: not what the stack does
    started: list[Started] = []
    monkeypatch.setattr(
        subprocess, "Popen", lambda argv, **o: started.append(Started(argv, **o)) or started[-1]
    )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        logs.setup("qm-stack", LogFormat.JSON, level="WARNING")
        settings = NodeSettings(host_id="node-1", instance_type="t", data_dir=tmp_path)
        agent = NodeProcess.spawn(settings, lambda: True)
        os.close(agent._lifeline)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    env = started[0].options["env"]
    assert (env["QM_NODE_LOG_FORMAT"], env["QM_NODE_LOG_LEVEL"]) == ("json", "WARNING")
    assert TelemetrySettings.from_env("QM_NODE_", env) == TelemetrySettings(
        log_format=LogFormat.JSON, log_level="WARNING"
    )
