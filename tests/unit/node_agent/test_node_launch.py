"""What a host runs for a dispatched attempt: command, environment, docker arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qm_node_agent.errors import LaunchError
from qm_node_agent.launch import CACHE_ENV, LaunchSpec, build_spec
from qm_node_agent.runtime.docker import run_args
from quartermaster import events as ev
from quartermaster.core import Job
from quartermaster.testing.builders import World

CACHE = Path("/data/warmpool-cache/j")
WORK = Path("/data/jobs/j-1")


def dispatched(payload: dict[str, object] | str, hosts: int = 2) -> Job:
    w = World().environment(ml_g5_xlarge=4).queue().hosts(hosts)
    w.share("QS1", 4, "LEND_AND_BORROW")
    raw = payload if isinstance(payload, str) else json.dumps(payload)
    w.apply(
        ev.JobSubmitted(
            at=w.clock,
            job_id="j",
            job_name="j",
            job_queue="q",
            quota_share="QS1",
            instance_type="ml.g5.xlarge",
            instance_count=hosts,
            payload=raw,
        )
    )
    w.pass_()
    return w.job("j")


def spec_for(job: Job, gpus: tuple[int, ...] = (0, 1, 2, 3)) -> LaunchSpec:
    return build_spec(
        job,
        host="h2",
        instance_type="ml.g5.xlarge",
        gpu_indexes=gpus,
        cache_dir=CACHE,
        work_dir=WORK,
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
        "SM_HOSTS": '["h1", "h2"]',
        "SM_CURRENT_HOST": "h2",
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


def test_docker_runs_detached_on_the_host_network_with_tini_and_the_cache() -> None:
    args = run_args(spec_for(dispatched(REQUEST)), "qm-j-1")

    assert args[:9] == [
        "-d",
        "--name",
        "qm-j-1",
        "--pull",
        "never",
        "--network",
        "host",
        "--init",
        "-e",
    ]
    assert "TINI_KILL_PROCESS_GROUP=1" in args
    assert ["-v", f"{CACHE}:/opt/ml/sagemaker/warmpoolcache"] == args[
        args.index("-v") : args.index("-v") + 2
    ]
    assert f"{CACHE_ENV}=/opt/ml/sagemaker/warmpoolcache" in args
    assert "SM_CURRENT_HOST=h2" in args
    assert args[args.index("--gpus") + 1] == '"device=0,1,2,3"'
    # the entrypoint's first word replaces the image's ENTRYPOINT, the rest follows the image
    assert args[args.index("--entrypoint") + 1] == "python"
    assert args[args.index("registry.local/train:3") :] == [
        "registry.local/train:3",
        "train.py",
        "--epochs",
        "3",
    ]


def test_docker_asks_for_gpus_only_on_a_gpu_host() -> None:
    assert "--gpus" not in run_args(spec_for(dispatched(REQUEST), gpus=()), "qm-j-1")


def test_docker_keeps_the_images_entrypoint_when_the_payload_names_none() -> None:
    request: dict[str, object] = {
        "AlgorithmSpecification": {"TrainingImage": "img:1", "ContainerArguments": ["x"]}
    }
    args = run_args(spec_for(dispatched(request)), "qm-j-1")

    assert "--entrypoint" not in args
    assert args[-2:] == ["img:1", "x"]
