"""What a host runs for a dispatched attempt: command, environment, docker arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from qm_node_agent.contract import Channel
from qm_node_agent.contract.stage import prepare
from qm_node_agent.errors import LaunchError
from qm_node_agent.launch import CACHE_ENV, LaunchSpec, build_spec
from qm_node_agent.layout import CONTAINER_CACHE_DIR
from qm_node_agent.runtime.docker import create_args
from qm_node_agent.runtime.sandbox import ChainFiles, image_ref, write_job_script
from quartermaster import events as ev
from quartermaster.core import Job
from quartermaster.testing.builders import dispatched_job

CACHE = Path("/data/warmpool-cache/j")
WORK = Path("/data/jobs/j-1")
ML = Path("/data/opt-ml/j/ml")
HOSTS = Path("/data/opt-ml/j/hosts")


def dispatched(payload: dict[str, object] | str, hosts: int = 2) -> Job:
    return dispatched_job(payload, hosts=hosts)


def spec_for(job: Job, gpus: tuple[int, ...] = (0, 1, 2, 3)) -> LaunchSpec:
    return build_spec(
        job,
        host="h2",
        instance_type="ml.g5.xlarge",
        gpu_indexes=gpus,
        cache_dir=CACHE,
        work_dir=WORK,
        ml_dir=ML,
        hosts_file=HOSTS,
    )


REQUEST = {
    "AlgorithmSpecification": {
        "TrainingImage": "registry.local/train:3",
        "ContainerEntrypoint": ["python", "train.py"],
        "ContainerArguments": ["--epochs", "3"],
    },
    "Environment": {"LR": "0.1", "SM_CURRENT_HOST": "spoofed", "BATCH": 64},
}


def test_the_command_is_the_entrypoint_then_the_arguments() -> None:
    spec = spec_for(dispatched(REQUEST))

    assert spec.image == "registry.local/train:3"
    assert spec.command == ("python", "train.py", "--epochs", "3")
    assert (spec.job_id, spec.attempt, spec.chain_id) == ("j", 1, "j")


def test_the_environment_is_the_payloads_plus_the_hosts_own() -> None:
    env = spec_for(dispatched(REQUEST)).environment_with_cache("/cache")

    assert env == {
        "LR": "0.1",
        "BATCH": "64",
        "SM_HOSTS": '["algo-1", "algo-2"]',
        "SM_CURRENT_HOST": "algo-2",
        "QM_HOST": "h2",
        "TRAINING_JOB_NAME": "j-j-1",
        "TRAINING_JOB_ARN": "arn:aws:sagemaker:us-east-1:000000000000:training-job/j-j-1",
        "SM_CURRENT_INSTANCE_TYPE": "ml.g5.xlarge",
        "SM_NUM_GPUS": "4",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
        "NVIDIA_VISIBLE_DEVICES": "0,1,2,3",
        "QM_JOB_ID": "j",
        "QM_ATTEMPT": "1",
        CACHE_ENV: "/cache",
    }


def test_a_host_without_gpus_shows_none() -> None:
    env = spec_for(dispatched(REQUEST), gpus=()).environment
    assert (env["SM_NUM_GPUS"], env["CUDA_VISIBLE_DEVICES"]) == ("0", "")


@pytest.mark.parametrize(
    ("payload", "complaint"),
    [
        ("{not json", "serviceRequestPayload is not JSON"),
        ('["a"]', "serviceRequestPayload must be an object"),
        ({"Environment": ["A=1"]}, "Environment must be an object"),
        (
            {"AlgorithmSpecification": {"ContainerEntrypoint": "python train.py"}},
            "ContainerEntrypoint must be a list of strings",
        ),
    ],
)
def test_a_payload_that_cannot_describe_a_run_is_a_client_error(
    payload: dict[str, object] | str, complaint: str
) -> None:
    with pytest.raises(LaunchError) as raised:
        spec_for(dispatched(payload))
    assert raised.value.failure_class is ev.FailureClass.CLIENT_ERROR
    assert raised.value.reason.startswith("ClientError: ")
    assert complaint in raised.value.reason


def test_docker_creates_the_container_with_tini_the_chain_volume_inputs_and_job_script(
    tmp_path: Path,
) -> None:
    spec = spec_for(dispatched(REQUEST))
    files = ChainFiles(tmp_path, spec.chain_id)
    args = create_args(spec, files, "registry.local/train:3", "qm-j-1", ["a=b"])

    assert args[:8] == ["--name", "qm-j-1", "--pull", "never", "--network", "host", "--init", "-e"]
    assert "TINI_KILL_PROCESS_GROUP=1" in args
    assert f"type=volume,src=qm-vol-j,dst={CONTAINER_CACHE_DIR}" in args
    assert f"{ML}:/opt/ml" in args
    assert f"{HOSTS}:/etc/hosts:ro" in args
    assert f"{files.control}:/opt/ml/qm:ro" in args
    assert args[args.index("--gpus") + 1] == '"device=0,1,2,3"'
    assert args[-4:] == ["--entrypoint", "/bin/sh", "registry.local/train:3", "/opt/ml/qm/job.sh"]


def test_docker_asks_for_gpus_only_on_a_gpu_host(tmp_path: Path) -> None:
    spec = spec_for(dispatched(REQUEST), gpus=())
    assert "--gpus" not in create_args(spec, ChainFiles(tmp_path, "j"), "i:1", "qm-j-1", [])


def test_the_job_script_exports_the_environment_and_execs_the_command(tmp_path: Path) -> None:
    spec = spec_for(dispatched(REQUEST))
    files = ChainFiles(tmp_path, spec.chain_id)
    files.create()
    write_job_script(files, spec, list(spec.command), CONTAINER_CACHE_DIR)

    script = (files.control / "job.sh").read_text()
    assert f"export {CACHE_ENV}={CONTAINER_CACHE_DIR}" in script
    assert "export SM_CURRENT_HOST=algo-2" in script
    assert 'export SM_HOSTS=\'["algo-1", "algo-2"]\'' in script
    assert script.splitlines()[-1] == "exec python train.py --epochs 3"


def test_an_environment_name_a_shell_cannot_export_is_a_client_error(tmp_path: Path) -> None:
    request = {**REQUEST, "Environment": {"BAD-NAME": "1"}}
    spec = spec_for(dispatched(request))
    files = ChainFiles(tmp_path, spec.chain_id)
    files.create()
    with pytest.raises(LaunchError, match="BAD-NAME"):
        write_job_script(files, spec, list(spec.command), CONTAINER_CACHE_DIR)


@pytest.mark.parametrize(
    ("image", "pulled"),
    [
        ("train:3", "127.0.0.1:5000/train:3"),
        ("team/train:3", "127.0.0.1:5000/team/train:3"),
        ("registry.local/train:3", "registry.local/train:3"),
        ("localhost:5001/train", "localhost:5001/train"),
    ],
)
def test_images_without_a_registry_host_come_from_the_hosts_registry(
    image: str, pulled: str
) -> None:
    assert image_ref("127.0.0.1:5000", image) == pulled
    assert image_ref("", image) == image


def test_input_channels_come_from_local_paths_and_file_uris() -> None:
    request = {
        **REQUEST,
        "InputDataConfig": [
            {"ChannelName": "train", "DataSource": {"S3DataSource": {"S3Uri": "file:///d/tr"}}},
            {
                "ChannelName": "test",
                "DataSource": {"FileSystemDataSource": {"DirectoryPath": "/d/te"}},
            },
        ],
    }
    spec = spec_for(dispatched(request))
    assert spec.contract.channels == (
        Channel(name="train", source="/d/tr"),
        Channel(name="test", source="/d/te"),
    )


@pytest.mark.parametrize(
    ("channels", "complaint"),
    [
        ("x", "InputDataConfig must be a list"),
        ([{"ChannelName": "../x", "DataSource": {}}], "ChannelName must match"),
        (
            [{"ChannelName": "a", "DataSource": {"S3DataSource": {"S3Uri": "s3://B_/k"}}}],
            "is not a valid S3 bucket name",
        ),
        (
            [{"ChannelName": "a", "DataSource": {"S3DataSource": {"S3Uri": "d/k"}}}],
            "is not an s3:// URI, a local path or file:// URI",
        ),
        (
            [
                {
                    "ChannelName": "a",
                    "InputMode": "Pipe",
                    "DataSource": {"S3DataSource": {"S3Uri": "s3://b/k"}},
                }
            ],
            "InputMode 'Pipe' is not supported",
        ),
        ([{"ChannelName": "a", "DataSource": {}}], "needs S3DataSource.S3Uri"),
    ],
)
def test_input_channels_a_host_cannot_stage_are_client_errors(
    channels: object, complaint: str
) -> None:
    with pytest.raises(LaunchError, match=complaint.replace(".", r"\.")):
        spec_for(dispatched({**REQUEST, "InputDataConfig": channels}))


def test_staging_copies_the_channels_once_while_they_stay_the_same(tmp_path: Path) -> None:
    source = tmp_path / "data"
    source.mkdir()
    (source / "part-0").write_text("rows")
    root = tmp_path / "opt-ml" / "chain"
    root.mkdir(parents=True)
    ml = root / "ml"

    def stage(channel: str) -> int:
        request = {
            **REQUEST,
            "InputDataConfig": [
                {
                    "ChannelName": channel,
                    "DataSource": {"FileSystemDataSource": {"DirectoryPath": str(source)}},
                }
            ],
        }
        job = dispatched(request)
        spec = build_spec(
            job,
            host="h2",
            instance_type="ml.g5.xlarge",
            gpu_indexes=(),
            cache_dir=CACHE,
            work_dir=WORK,
            ml_dir=ml,
            hosts_file=root / "hosts",
        )
        addresses = {"h1": "127.0.0.1", "h2": "127.0.0.2"}
        return prepare(spec.contract, None, addresses=addresses, network_interface="lo").channels

    data = ml / "input" / "data"
    assert stage("train") == 1
    assert (data / "train" / "part-0").read_text() == "rows"
    assert stage("train") == 0
    assert stage("eval") == 1
    assert sorted(p.name for p in data.iterdir()) == ["eval"]
