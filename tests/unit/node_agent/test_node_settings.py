"""Node agent settings: read once from QM_NODE_* variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from qm_node_agent import NodeSettings, RuntimeKind
from qm_node_agent.errors import SettingsError
from quartermaster.bus.access import NatsCredentials

REQUIRED = {
    "QM_NODE_HOST_ID": "gpu-7",
    "QM_NODE_INSTANCE_TYPE": "ml.p5.48xlarge",
    "QM_NODE_DATA_DIR": "/var/lib/qm-node",
}


def test_defaults_fill_what_is_not_set() -> None:
    settings = NodeSettings.from_env({**REQUIRED, "PATH": "/usr/bin:/bin"})

    assert settings.host_id == "gpu-7"
    assert settings.instance_type == "ml.p5.48xlarge"
    assert settings.data_dir == Path("/var/lib/qm-node")
    assert settings.gpu_count is None  # detect
    assert settings.service_environment is None
    assert settings.runtime is RuntimeKind.PROCESS
    assert (settings.stream, settings.subject_prefix) == ("QM", "qm")
    assert (settings.heartbeat_seconds, settings.stop_grace_seconds) == (5.0, 120.0)
    assert settings.docker_binary == "docker"
    assert settings.job_path == "/usr/bin:/bin"
    assert settings.address  # the machine's host name


def test_every_setting_can_be_given() -> None:
    settings = NodeSettings.from_env(
        {
            **REQUIRED,
            "QM_NODE_GPU_COUNT": "8",
            "QM_NODE_SERVICE_ENVIRONMENT": "research",
            "QM_NODE_RUNTIME": "docker",
            "QM_NODE_NATS_URL": "nats://nats:4222",
            "QM_NODE_STREAM": "QM2",
            "QM_NODE_SUBJECT_PREFIX": "qm2",
            "QM_NODE_HEARTBEAT_SECONDS": "2.5",
            "QM_NODE_STOP_GRACE_SECONDS": "30",
            "QM_NODE_DOCKER_BINARY": "/usr/bin/docker",
            "QM_NODE_ADDRESS": "10.0.0.7",
        }
    )

    assert settings.gpu_count == 8
    assert settings.service_environment == "research"
    assert settings.runtime is RuntimeKind.DOCKER
    assert settings.nats_url == "nats://nats:4222"
    assert (settings.stream, settings.subject_prefix) == ("QM2", "qm2")
    assert (settings.heartbeat_seconds, settings.stop_grace_seconds) == (2.5, 30.0)
    assert settings.docker_binary == "/usr/bin/docker"
    assert settings.address == "10.0.0.7"


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"QM_NODE_HOST_ID": ""}, "QM_NODE_HOST_ID is required"),
        ({"QM_NODE_RUNTIME": "podman"}, "use process or docker"),
        ({"QM_NODE_GPU_COUNT": "eight"}, "not an integer"),
        ({"QM_NODE_GPU_COUNT": "-1"}, "must not be negative"),
        ({"QM_NODE_HEARTBEAT_SECONDS": "0"}, "must be positive"),
        ({"QM_NODE_STOP_GRACE_SECONDS": "soon"}, "not a number"),
    ],
)
def test_bad_values_are_refused_with_the_variable_named(
    changes: dict[str, str], complaint: str
) -> None:
    with pytest.raises(SettingsError, match=complaint):
        NodeSettings.from_env({**REQUIRED, **changes})


def test_settings_written_as_variables_read_back_the_same() -> None:
    """`to_env` (how `qm up --node-processes` configures each agent) loses nothing."""
    settings = NodeSettings(
        host_id="gpu-7",
        instance_type="ml.p5.48xlarge",
        data_dir=Path("/var/lib/qm-node"),
        nats_url="tls://a:4222,tls://b:4222",
        gpu_count=8,
        service_environment="research",
        address="10.0.0.7",
        runtime=RuntimeKind.DOCKER,
        stream="S",
        subject_prefix="p",
        heartbeat_seconds=1.5,
        stop_grace_seconds=7.0,
        docker_binary="/usr/bin/docker",
        registry="127.0.0.1:5000",
        nvidia_smi="/opt/nvidia-smi",
        job_path="/usr/bin",
        nats_credentials=NatsCredentials(
            user="node-gpu-7", password="pw", tls_ca="/ca", tls_cert="/c", tls_key="/k"
        ),
        stream_replicas=3,
        log_cap_bytes=1024,
        log_retention_seconds=60.0,
        metrics_port=9100,
        metrics_host="0.0.0.0",
        read_whole_log=True,
        lifeline_fd=5,
    )
    assert NodeSettings.from_env(settings.to_env()) == settings
    defaults = NodeSettings(host_id="h", instance_type="t", data_dir=Path("/d"), address="a")
    assert NodeSettings.from_env(defaults.to_env()) == defaults


def test_a_lifeline_that_is_not_a_descriptor_is_refused() -> None:
    with pytest.raises(SettingsError, match="QM_NODE_LIFELINE_FD"):
        NodeSettings.from_env({**REQUIRED, "QM_NODE_LIFELINE_FD": "stdin"})
