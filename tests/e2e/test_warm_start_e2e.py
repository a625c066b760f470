"""Warm starts through the whole stack (docker runtime): DescribeServiceJob shows each phase.

The first job starts cold (volume, staging of its input channel, container);
the second matches its warm pool and starts in the ready sandbox with the
staged inputs (pull, volume and staging 0). Ending the pool frees its sandbox
and volume.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import StackFactory, client_for
from scenario import setup_queue, status, until
from test_docker_e2e import container_job, docker  # noqa: F401 (the fixture)

CACHE = '"$SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY"'


def engine_has(kind: str, name: str) -> bool:
    return subprocess.run(["docker", kind, "inspect", name], capture_output=True).returncode == 0


def with_input(job: dict[str, object], folder: Path) -> dict[str, object]:
    source = {"S3DataSource": {"S3Uri": f"file://{folder}", "S3DataType": "S3Prefix"}}
    return {**job, "InputDataConfig": [{"ChannelName": "train", "DataSource": source}]}


@pytest.mark.docker
def test_a_warm_reuse_starts_in_the_pools_sandbox_and_describe_shows_the_phases(
    docker: None,  # noqa: F811
    make_stack: StackFactory,
    tmp_path: Path,
) -> None:
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "part-0").write_text("rows\n")
    stack = make_stack(nodes=1, runtime="docker")
    c = client_for(stack)
    queue = setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    read = f"cat /opt/ml/input/data/train/part-0 >> {CACHE}/seen"
    job = with_input(container_job(read, keep_alive_seconds=600), data)

    first = queue.submit(job, job_name="cold", quota_share_name="A")
    until("the cold job succeeded", lambda: status(c, first.job_id) == "SUCCEEDED")
    until(
        "its pool is available", lambda: c.describe_job(first.job_id).HasField("warm_pool_status")
    )
    second = queue.submit(job, job_name="warm", quota_share_name="A")
    until("the warm job succeeded", lambda: status(c, second.job_id) == "SUCCEEDED")

    cold = c.describe_job(first.job_id).latest_attempt.start_phases
    warm = c.describe_job(second.job_id).latest_attempt.start_phases
    reused_by = c.describe_job(first.job_id).warm_pool_status.reused_by_job
    cache = stack.stack.node_data_dir(stack.stack.host_ids()[0]) / "warmpool-cache" / first.job_id
    seen = (cache / "seen").read_text()
    host = stack.stack.host_ids()[0]
    sandbox, volume = f"qm-sandbox-{host}-{first.job_id}", f"qm-vol-{host}-{first.job_id}"
    until("the next ready sandbox", lambda: engine_has("container", sandbox))

    c.update_warm_pool(second.job_id, 0)  # the user ends the pool
    until(
        "the pool's sandbox and volume are freed",
        lambda: not engine_has("container", sandbox) and not engine_has("volume", volume),
    )
    assert reused_by == second.job_id
    assert seen == "rows\nrows\n"  # both saw the staged channel, the second without staging
    assert not cold.warm and cold.volume_seconds > 0 and cold.staging_seconds > 0
    assert cold.container_seconds > 0
    assert warm.warm and warm.container_seconds > 0
    assert (warm.pull_seconds, warm.volume_seconds, warm.staging_seconds) == (0, 0, 0)
    assert json.loads(c.describe_job(second.job_id).service_request_payload)["InputDataConfig"]
