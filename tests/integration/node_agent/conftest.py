"""Fixtures for the node agent against a real nats-server (and a real Docker engine).

The server fixtures (`nats_server`, `jetstream_log`) come from the top-level
`tests/conftest.py`, which loads `quartermaster.testing.servers`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from node_agent_harness import JOB_RUNNER_IMAGE, Cluster

from quartermaster.bus import JetStreamLog


@pytest_asyncio.fixture
async def cluster(jetstream_log: JetStreamLog, tmp_path: Path) -> AsyncIterator[Cluster]:
    """A configured log (environment, queue, share) and a follower that folds it."""
    cluster = Cluster(jetstream_log, tmp_path)
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.close()


def _docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=30)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """A running Docker engine with the job-runner image built (never pulled)."""
    try:
        info = _docker("info", "--format", "{{.ServerVersion}}")
    except (OSError, subprocess.TimeoutExpired) as err:
        _unavailable(f"docker info failed: {err}; start it with deploy/docker/ensure-engine.sh")
        return
    if info.returncode != 0:
        _unavailable(
            f"docker info failed: {info.stderr.strip()}; "
            "start the engine with deploy/docker/ensure-engine.sh"
        )
    image = _docker("image", "inspect", JOB_RUNNER_IMAGE)
    if image.returncode != 0:
        _unavailable(f"{JOB_RUNNER_IMAGE} is missing: run deploy/images/build-test-images.sh")


@pytest.fixture
def containers(docker_engine: None, request: pytest.FixtureRequest) -> Iterator[str]:
    """A job id prefix for this test (ids are `<prefix>-<name>`); its containers and
    volumes are removed afterwards."""
    prefix = f"dk{abs(hash(request.node.nodeid)) % 10**8}"
    yield prefix
    for kind, listing in (("container", ("ps", "-aq")), ("volume", ("volume", "ls", "-q"))):
        ids = _docker(*listing, "--filter", f"name={prefix}-").stdout.split()  # dk1-, not dk12
        if ids:
            _docker(kind, "rm", "-f", *ids)
