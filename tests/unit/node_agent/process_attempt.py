"""An attempt of job `j` on host h1 for the process runtime, laid out under a test's
folder: its launch spec and its record."""

from __future__ import annotations

from pathlib import Path

from qm_node_agent.launch import LaunchSpec, build_spec
from qm_node_agent.records import AttemptRecord
from quartermaster.testing.builders import dispatched_job


def attempt(
    tmp_path: Path, payload: dict[str, object], *, address: str = "127.0.0.1"
) -> tuple[LaunchSpec, AttemptRecord]:
    chain = tmp_path / "opt-ml" / "j"
    spec = build_spec(
        dispatched_job(payload),
        host="h1",
        instance_type="ml.g5.xlarge",
        gpu_indexes=(),
        cache_dir=tmp_path / "cache" / "j",
        work_dir=tmp_path / "jobs" / "j-1",
        ml_dir=chain / "ml",
        hosts_file=chain / "hosts",
        addresses={"h1": address},
        network_interface="lo",
    )
    record = AttemptRecord(
        job_id="j",
        attempt=1,
        host="h1",
        runtime="process",
        chain_id="j",
        launched_at=0.0,
        exit_file=str(tmp_path / "exit"),
        log_file=str(tmp_path / "log"),
    )
    return spec, record
