"""`qm up` flags that reach its node agents: `--registry` (the docker runtime pulls
cold-start images from it) and `--node-processes`."""

from __future__ import annotations

import argparse

from qm_node_agent.settings import NodeSettings
from quartermaster_stack.cli import register, settings_from


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["up", *argv])


def test_qm_up_passes_the_registry_to_its_stack() -> None:
    assert settings_from(parsed()).registry == ""
    assert settings_from(parsed("--registry", "127.0.0.1:5000")).registry == "127.0.0.1:5000"


def test_a_node_agent_reads_its_registry_from_the_environment() -> None:
    env = {
        "QM_NODE_HOST_ID": "h1",
        "QM_NODE_INSTANCE_TYPE": "ml.g5.xlarge",
        "QM_NODE_DATA_DIR": "/tmp/qm",
        "QM_NODE_REGISTRY": "127.0.0.1:5000",
    }
    assert NodeSettings.from_env(env).registry == "127.0.0.1:5000"
    assert NodeSettings.from_env({**env, "QM_NODE_REGISTRY": ""}).registry == ""


def test_qm_up_runs_agents_in_processes_of_their_own_when_asked() -> None:
    assert settings_from(parsed()).node_processes is False
    assert settings_from(parsed("--node-processes")).node_processes is True
