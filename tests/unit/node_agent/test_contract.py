"""The training-job contract's files, as SageMaker documents them (no store: local channels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qm_node_agent.contract import build_contract
from qm_node_agent.contract.outputs import collect, failure_reason
from qm_node_agent.contract.spec import Outputs, algo_hosts
from qm_node_agent.contract.stage import prepare, write_if_changed
from qm_node_agent.errors import LaunchError
from quartermaster import events as ev
from quartermaster.core import Job
from quartermaster.core.training_job import training_job_arn, training_job_name
from quartermaster.objectstore import StoreClientError
from quartermaster.testing.builders import World


def gang(payload: dict[str, object], hosts: int = 3, name: str = "train_v2") -> Job:
    w = World().environment(ml_g5_xlarge=4).queue().hosts(hosts)
    w.share("QS1", 4, "LEND_AND_BORROW")
    w.apply(
        ev.JobSubmitted(
            at=w.clock,
            job_id="0123456789abcdef",
            job_name=name,
            job_queue="q",
            quota_share="QS1",
            instance_type="ml.g5.xlarge",
            instance_count=hosts,
            payload=json.dumps(payload),
        )
    )
    w.pass_()
    return w.job("0123456789abcdef")


def made(tmp_path: Path, payload: dict[str, object], host: str = "h2") -> tuple[Path, Job]:
    job = gang(payload)
    root = tmp_path / "chain"
    root.mkdir(exist_ok=True)
    contract = build_contract(
        job,
        payload,
        host=host,
        instance_type="ml.g5.xlarge",
        ml_dir=str(root / "ml"),
        hosts_file=str(root / "hosts"),
    )
    addresses = {h: f"10.0.0.{h[1:]}" for h in job.hosts}
    prepare(contract, None, addresses=addresses, network_interface="eth7")
    return root, job


def test_config_files_are_written_as_sagemaker_documents_them(tmp_path: Path) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / "rows.csv").write_text("1,2\n")
    payload = {
        "HyperParameters": {"epochs": "3", "lr": "0.1"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "ContentType": "text/csv",
                "DataSource": {
                    "S3DataSource": {
                        "S3Uri": f"file://{data}",
                        "S3DistributionType": "ShardedByS3Key",
                    }
                },
            }
        ],
    }
    root, job = made(tmp_path, payload)
    config = root / "ml" / "input" / "config"

    assert json.loads((config / "hyperparameters.json").read_text()) == {
        "epochs": "3",
        "lr": "0.1",
    }
    assert json.loads((config / "inputdataconfig.json").read_text()) == {
        "train": {
            "TrainingInputMode": "File",
            "S3DistributionType": "ShardedByS3Key",
            "RecordWrapperType": "None",
            "ContentType": "text/csv",
        }
    }
    position = job.hosts.index("h2") + 1
    assert json.loads((config / "resourceconfig.json").read_text()) == {
        "current_host": f"algo-{position}",
        "current_instance_type": "ml.g5.xlarge",
        "current_group_name": "homogeneousCluster",
        "hosts": ["algo-1", "algo-2", "algo-3"],
        "instance_groups": [
            {
                "instance_group_name": "homogeneousCluster",
                "instance_type": "ml.g5.xlarge",
                "hosts": ["algo-1", "algo-2", "algo-3"],
            }
        ],
        "network_interface_name": "eth7",
    }
    assert (root / "ml" / "input" / "data" / "train" / "rows.csv").read_text() == "1,2\n"
    for folder in ("model", "output/data", "checkpoints"):
        assert (root / "ml" / folder).is_dir()


def test_every_algo_host_resolves_to_its_gang_hosts_address(tmp_path: Path) -> None:
    root, job = made(tmp_path, {})
    lines = (root / "hosts").read_text().splitlines()
    entries = dict(reversed(line.split("\t")) for line in lines if "\talgo-" in line)
    assert entries == {f"algo-{i}": f"10.0.0.{h[1:]}" for i, h in enumerate(job.hosts, 1)}
    assert "localhost" in (root / "hosts").read_text()  # the host's own entries stay


def test_algo_hosts_sort_as_sagemaker_sorts_them() -> None:
    assert algo_hosts(11)[:3] == ("algo-1", "algo-10", "algo-11")


def test_each_attempt_is_a_training_job_with_a_valid_name() -> None:
    name = training_job_name("my job_with.odd/chars" * 5, "0123456789abcdef", 2)
    assert len(name) <= 63 and name.endswith("-01234567-2")
    assert all(c.isalnum() or c == "-" for c in name) and "--" not in name
    assert training_job_arn(name).endswith(f":training-job/{name}")


def test_a_new_attempt_starts_with_fresh_model_and_output_folders(tmp_path: Path) -> None:
    root, _job = made(tmp_path, {})
    (root / "ml" / "model" / "old.bin").write_text("x")
    (root / "ml" / "output" / "failure").write_text("old failure")
    made(tmp_path, {})
    assert list((root / "ml" / "model").iterdir()) == []
    assert not (root / "ml" / "output" / "failure").exists()


def test_the_failure_file_gives_the_first_1024_characters(tmp_path: Path) -> None:
    (tmp_path / "output").mkdir()
    (tmp_path / "output" / "failure").write_text("x" * 5000)
    outputs = Outputs(ml_dir=str(tmp_path), training_job_name="t")
    assert failure_reason(outputs) == "x" * 1024


def test_outputs_without_credentials_are_never_reported_done(tmp_path: Path) -> None:
    outputs = Outputs(
        ml_dir=str(tmp_path), training_job_name="t", output_path="s3://bucket/out", role_arn="r"
    )
    assert outputs.model_uri == "s3://bucket/out/t/output/model.tar.gz"
    with pytest.raises(StoreClientError, match="maps to no object-store credentials"):
        collect(outputs, None)


def test_an_s3_channel_without_credentials_is_a_client_error(tmp_path: Path) -> None:
    payload = {
        "RoleArn": "arn:aws:iam::1:role/none",
        "InputDataConfig": [
            {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "s3://data/x/"}}}
        ],
    }
    with pytest.raises(LaunchError) as raised:
        made(tmp_path, payload)
    assert raised.value.failure_class is ev.FailureClass.CLIENT_ERROR
    assert "'train'" in raised.value.reason and "s3://data/x/" in raised.value.reason


def test_a_reused_trees_file_is_rewritten_in_place_and_cut_to_length(tmp_path: Path) -> None:
    path = tmp_path / "resourceconfig.json"
    write_if_changed(path, b"a longer document from the last chain")
    inode = path.stat().st_ino
    write_if_changed(path, b"shorter")
    assert (path.read_bytes(), path.stat().st_ino) == (b"shorter", inode)
    before = path.stat().st_mtime_ns
    write_if_changed(path, b"shorter")  # the same: not written at all
    assert path.stat().st_mtime_ns == before
    write_if_changed(path, b"shorter, then longer")
    assert path.read_bytes() == b"shorter, then longer"
