"""SageMaker's own in-container code, run by the node agent against a real S3 store.

Two ways jobs reach the contract from the SageMaker Python SDK, each with the
unmodified code that runs inside SageMaker's containers:

- script mode: the training toolkit (PyPI `sagemaker-training`, the `train`
  command of the AWS framework images) fetches `sourcedir.tar.gz` from S3, turns
  the hyperparameters and channels into arguments and `SM_*` variables and runs
  the user's script;
- `ModelTrainer` (SDK v3): `sm_train.sh` and the `sm_drivers` channel, generated
  by the SDK's own code, run the `SourceCode` command in the `code` channel.

Both jobs run on the process runtime with the venv's bin folder as the job PATH
(there is no image: `train`, python3 and pip come from the venv).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tarfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from node_agent_harness import Cluster, payload
from s3_harness import ROLE, put_tree, role_map_file, store_with_buckets

from quartermaster import events as ev
from quartermaster.objectstore import S3Access, parse_s3_uri
from quartermaster.objectstore.store import ObjectStore

VENV_BIN = str(Path(sys.executable).parent)  # `train`, python3, pip
JOB_PATH = os.pathsep.join([VENV_BIN, os.defpath])
ROWS = b"1,2\n3,4\n5,6\n"  # the `train` channel's data: three rows summing to 21
EPOCHS = 3


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Access]:
    with store_with_buckets(tmp_path_factory.mktemp("s3"), "code", "data", "out") as access:
        yield access


@pytest.fixture
def store(s3: S3Access) -> ObjectStore:
    return ObjectStore(s3)


@pytest.fixture
async def sm_cluster(cluster: Cluster, s3: S3Access) -> AsyncIterator[Cluster]:
    role_map_file(cluster.tmp / "roles.json", s3)
    yield cluster


def settings(cluster: Cluster) -> Any:
    return cluster.settings(roles_file=str(cluster.tmp / "roles.json"), job_path=JOB_PATH)


def s3_channel(name: str, uri: str) -> dict[str, Any]:
    return {
        "ChannelName": name,
        "DataSource": {
            "S3DataSource": {
                "S3Uri": uri,
                "S3DataType": "S3Prefix",
                "S3DistributionType": "FullyReplicated",
            }
        },
    }


def training_job(
    entrypoint: list[str],
    arguments: list[str],
    hyperparameters: dict[str, str],
    channels: list[dict[str, Any]],
) -> str:
    body = json.loads(payload(entrypoint=entrypoint))
    if arguments:
        body["AlgorithmSpecification"]["ContainerArguments"] = arguments
    body["RoleArn"] = ROLE
    body["HyperParameters"] = hyperparameters
    body["InputDataConfig"] = channels
    body["OutputDataConfig"] = {"S3OutputPath": "s3://out/models"}
    return json.dumps(body)


def model_files(store: ObjectStore, uri: str) -> dict[str, bytes]:
    data = store.get_bytes(parse_s3_uri(uri))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def expected_model(epochs: int) -> bytes:
    """What both scripts write: derived from the channel's rows and the hyperparameter."""
    total = sum(int(cell) for line in ROWS.decode().split() for cell in line.split(","))
    return f"rows=3 sum={total} epochs={epochs} weight={total * epochs}\n".encode()


def summarise_rows(channel_dir: str) -> str:
    """The part of both training scripts that reads the channel (kept in one place)."""
    return (
        "import os\n"
        f"rows = open(os.path.join({channel_dir}, 'rows.csv')).read().split()\n"
        "total = sum(int(cell) for line in rows for cell in line.split(','))\n"
    )


async def run_to_success(cluster: Cluster, job_id: str, body: str) -> Any:
    async with cluster.agent(settings(cluster)):
        await cluster.until_host()
        await cluster.run(job_id, body)
        await cluster.until(
            f"{job_id} ended",
            lambda: bool(
                cluster.reported(job_id, ev.JobSucceeded) or cluster.reported(job_id, ev.JobFailed)
            ),
            timeout=180,  # a cold start imports boto3 and friends: seconds, not minutes
        )
    failed = cluster.reported(job_id, ev.JobFailed)
    assert not failed, f"{job_id} failed: {failed[0].reason}"
    return cluster.reported(job_id, ev.JobSucceeded)[0]


# ---- script mode through the training toolkit ---------------------------------------

TOOLKIT_SCRIPT = (
    "import argparse\n"
    + summarise_rows("os.environ['SM_CHANNEL_TRAIN']")
    + "parser = argparse.ArgumentParser()\n"
    "parser.add_argument('--epochs', type=int, required=True)\n"
    "args, _ = parser.parse_known_args()\n"
    "assert os.environ['SM_HP_EPOCHS'] == str(args.epochs), os.environ['SM_HP_EPOCHS']\n"
    "assert os.environ['SM_CHANNEL_TRAIN'] == '/opt/ml/input/data/train'\n"
    "with open(os.path.join(os.environ['SM_MODEL_DIR'], 'model.txt'), 'w') as f:\n"
    "    f.write(f'rows={len(rows)} sum={total} epochs={args.epochs} "
    "weight={total * args.epochs}\\n')\n"
)


def sourcedir_tar(files: dict[str, str]) -> bytes:
    """A `sourcedir.tar.gz` as the SDK's script mode packs the source folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            member = tarfile.TarInfo(name)
            member.size = len(data)
            member.mode = 0o644
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


async def test_script_mode_runs_through_the_sagemaker_training_toolkit(
    sm_cluster: Cluster, store: ObjectStore
) -> None:
    cluster = sm_cluster
    assert shutil.which("train", path=JOB_PATH), "sagemaker-training's `train` is not installed"
    put_tree(
        store,
        "s3://code/tk/",
        {"sourcedir.tar.gz": sourcedir_tar({"train_script.py": TOOLKIT_SCRIPT})},
    )
    put_tree(store, "s3://data/tk/train/", {"rows.csv": ROWS})
    # As the SageMaker Python SDK writes them for an Estimator: each value JSON-encoded.
    hyperparameters = {
        "sagemaker_program": json.dumps("train_script.py"),
        "sagemaker_submit_directory": json.dumps("s3://code/tk/sourcedir.tar.gz"),
        "sagemaker_region": json.dumps("us-east-1"),
        "sagemaker_container_log_level": "20",
        "epochs": json.dumps(EPOCHS),
    }
    body = training_job(
        ["train"], [], hyperparameters, [s3_channel("train", "s3://data/tk/train/")]
    )

    done = await run_to_success(cluster, "tk", body)

    model = "s3://out/models/tk-tk-1/output/model.tar.gz"
    assert done.model_artifacts == model
    assert model_files(store, model) == {"model.txt": expected_model(EPOCHS)}


# ---- ModelTrainer's sm_drivers ------------------------------------------------------

TRAINER_SCRIPT = (
    "import json\n"
    + summarise_rows("os.environ['SM_CHANNEL_TRAIN']")
    + "epochs = json.loads(os.environ['SM_HPS'])['epochs']\n"
    "assert os.getcwd() == '/opt/ml/input/data/code', os.getcwd()\n"
    "with open(os.path.join(os.environ['SM_MODEL_DIR'], 'model.txt'), 'w') as f:\n"
    "    f.write(f'rows={len(rows)} sum={total} epochs={epochs} weight={total * epochs}\\n')\n"
)


def model_trainer_drivers(where: Path, source_dir: Path, hyperparameters: dict[str, Any]) -> Any:
    """The `sm_drivers` folder as `ModelTrainer._create_training_job_args` builds it for a
    `SourceCode`, by the SDK's own code (its methods read only the attributes given to
    the stand-in: a real ModelTrainer needs a SageMaker session). Returns the SDK's
    serialized hyperparameters and container entrypoint and arguments."""
    pytest.importorskip("sagemaker.train.model_trainer", reason="SageMaker Python SDK v3")
    import sagemaker.core.utils.install_requirements as install_requirements
    from sagemaker.train.configs import SourceCode
    from sagemaker.train.constants import (
        DEFAULT_CONTAINER_ARGUMENTS,
        DEFAULT_CONTAINER_ENTRYPOINT,
        SM_DRIVERS_LOCAL_PATH,
    )
    from sagemaker.train.model_trainer import ModelTrainer, safe_serialize

    source_code = SourceCode(source_dir=str(source_dir), command="python train.py")
    shutil.copytree(SM_DRIVERS_LOCAL_PATH, where, dirs_exist_ok=True)
    shutil.copy2(install_requirements.__file__, where / "scripts" / "install_requirements.py")
    trainer = SimpleNamespace(hyperparameters=hyperparameters, _jumpstart_config=None)
    tmp_dir = SimpleNamespace(name=str(where))
    ModelTrainer._prepare_train_script(trainer, tmp_dir, source_code, None)  # type: ignore[arg-type]
    ModelTrainer._write_source_code_json(trainer, tmp_dir, source_code)  # type: ignore[arg-type]
    ModelTrainer._write_distributed_json(trainer, tmp_dir, None)  # type: ignore[arg-type]
    serialized = {name: safe_serialize(value) for name, value in hyperparameters.items()}
    return serialized, list(DEFAULT_CONTAINER_ENTRYPOINT), list(DEFAULT_CONTAINER_ARGUMENTS)


def upload_dir(store: ObjectStore, base: str, folder: Path) -> None:
    files = {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
    put_tree(store, base, files)


async def test_a_model_trainer_job_runs_its_sm_drivers(
    sm_cluster: Cluster, store: ObjectStore, tmp_path: Path
) -> None:
    cluster = sm_cluster
    source_dir = tmp_path / "src"
    source_dir.mkdir()
    (source_dir / "train.py").write_text(TRAINER_SCRIPT)
    drivers = tmp_path / "sm_drivers"
    hyperparameters, entrypoint, arguments = model_trainer_drivers(
        drivers, source_dir, {"epochs": EPOCHS}
    )
    assert entrypoint == ["/bin/bash"]
    assert arguments[-1].endswith("/opt/ml/input/data/sm_drivers/sm_train.sh")
    upload_dir(store, "s3://code/mt/code/", source_dir)
    upload_dir(store, "s3://code/mt/sm_drivers/", drivers)
    put_tree(store, "s3://data/mt/train/", {"rows.csv": ROWS})
    # The order ModelTrainer gives them: the user's channels, then code, then sm_drivers.
    channels = [
        s3_channel("train", "s3://data/mt/train/"),
        s3_channel("code", "s3://code/mt/code/"),
        s3_channel("sm_drivers", "s3://code/mt/sm_drivers/"),
    ]
    body = training_job(entrypoint, arguments, hyperparameters, channels)

    done = await run_to_success(cluster, "mt", body)

    model = "s3://out/models/mt-mt-1/output/model.tar.gz"
    assert done.model_artifacts == model
    assert model_files(store, model) == {"model.txt": expected_model(EPOCHS)}
