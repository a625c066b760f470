"""`quartermaster.testing`'s cleanup of what a stack's docker agents left on the engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from node_agent_harness import JOB_RUNNER_IMAGE, engine_has

from quartermaster.testing.container_parts import HOST_LABEL, JOB_LABEL, remove_job_resources
from quartermaster.testing.registry import docker

pytestmark = pytest.mark.docker


def leave(folder: Path, name: str) -> None:
    """A job container mounting `folder` and a warm pool volume over it, as an agent
    leaves them."""
    folder.mkdir(parents=True)
    docker(
        "volume",
        "create",
        "--label",
        f"{HOST_LABEL}=h1",
        "--opt",
        "type=none",
        "--opt",
        "o=bind",
        "--opt",
        f"device={folder}",
        f"qm-vol-{name}",
    )
    docker(
        "create",
        "--name",
        f"qm-{name}",
        "--label",
        f"{JOB_LABEL}={name}",
        "-v",
        f"{folder}:/data",
        JOB_RUNNER_IMAGE,
        "true",
    )


def test_a_stacks_end_removes_its_job_containers_and_volumes_and_no_others(
    containers: str, tmp_path: Path
) -> None:
    mine, other = f"{containers}-mine", f"{containers}-other"
    leave(tmp_path / "stack1" / "warm" / "c1", mine)
    leave(tmp_path / "stack10" / "warm" / "c1", other)  # a sibling whose name starts alike

    remove_job_resources(tmp_path / "stack1", "s1")

    assert not engine_has("container", f"qm-{mine}") and not engine_has("volume", f"qm-vol-{mine}")
    assert engine_has("container", f"qm-{other}") and engine_has("volume", f"qm-vol-{other}")
    remove_job_resources(tmp_path / "stack10", "s10")
    assert not engine_has("container", f"qm-{other}")
    assert not engine_has("volume", f"qm-vol-{other}")
