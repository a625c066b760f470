"""The training-job contract on the process runtime, against a real S3 store (SeaweedFS).

Channels from S3 (prefix, manifest, sharded across a gang), the model and output
data uploaded however the job ends, the failure file as the reason, a store's
refusals as the client's errors and its silence as the host's, checkpoints that
follow a preempted job to another host.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from node_agent_harness import Cluster, payload
from s3_harness import ROLE, put_tree, role_map_file, store_with_buckets

from qm_node_agent.contract import build_contract
from qm_node_agent.contract import stage as stage_module
from qm_node_agent.contract.stage import prepare
from quartermaster import events as ev
from quartermaster.core import JobStatus
from quartermaster.objectstore import RoleMap, S3Access, parse_s3_uri
from quartermaster.objectstore.store import ObjectStore
from quartermaster.testing.builders import dispatched_job


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Access]:
    with store_with_buckets(tmp_path_factory.mktemp("s3"), "data", "out") as access:
        yield access


@pytest.fixture
def store(s3: S3Access) -> ObjectStore:
    return ObjectStore(s3)


@pytest.fixture
async def contract_cluster(cluster: Cluster, s3: S3Access) -> AsyncIterator[Cluster]:
    role_map_file(cluster.tmp / "roles.json", s3)
    yield cluster


def request(script: str, **extra: Any) -> str:
    body = json.loads(payload(script))
    body["RoleArn"] = ROLE
    body.update(extra)
    return json.dumps(body)


def channel(name: str, uri: str, **source: str) -> dict[str, Any]:
    return {
        "ChannelName": name,
        "DataSource": {"S3DataSource": {"S3Uri": uri, "S3DataType": "S3Prefix", **source}},
    }


def members(store: ObjectStore, uri: str) -> dict[str, bytes]:
    data = store.get_bytes(parse_s3_uri(uri))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def job_namespaces(training_job_prefix: str) -> set[str]:
    """The mount namespaces of processes whose TRAINING_JOB_NAME starts with the prefix."""
    found = set()
    marker = f"TRAINING_JOB_NAME={training_job_prefix}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if any(v.startswith(marker) for v in (entry / "environ").read_bytes().split(b"\0")):
                    found.add(str((entry / "ns" / "mnt").readlink()))
            except OSError:
                continue
    return found


def settings(cluster: Cluster, host: str = "h1") -> Any:
    return cluster.settings(host, roles_file=str(cluster.tmp / "roles.json"))


async def test_channels_come_from_s3_and_the_model_goes_back(
    contract_cluster: Cluster, store: ObjectStore
) -> None:
    cluster = contract_cluster
    put_tree(store, "s3://data/run1/train/", {"a.csv": b"1,2\n", "sub/b.csv": b"3,4\n"})
    script = (
        "set -e; cd /opt/ml; cat input/data/train/a.csv input/data/train/sub/b.csv > model/rows;"
        " cp input/config/hyperparameters.json model/hp.json;"
        " echo done > output/data/report.txt;"
        ' [ "$AWS_ENDPOINT_URL_S3" != "" ] && [ "$S3_ENDPOINT_URL" = "$AWS_ENDPOINT_URL_S3" ]'
        ' && [ "$TRAINING_JOB_NAME" = "s3job-s3job-1" ]'
    )
    body = request(
        script,
        HyperParameters={"epochs": "3"},
        InputDataConfig=[channel("train", "s3://data/run1/train")],
        OutputDataConfig={"S3OutputPath": "s3://out/models"},
    )
    host = settings(cluster)
    async with cluster.agent(host):
        await cluster.until_host()
        await cluster.run("s3job", body)
        done = await cluster.until_reported("s3job", ev.JobSucceeded, timeout=60)
        # Nothing stays behind once no warm pool keeps the chain: its /opt/ml tree and
        # staged channels, the archives' temporary files, the job's mount namespace.
        ml_root = Path(host.data_dir) / "opt-ml"
        await cluster.until("the chain's /opt/ml removed", lambda: not any(ml_root.iterdir()))
        await cluster.until("no mount namespace of the job", lambda: not job_namespaces("s3job-"))

    model = "s3://out/models/s3job-s3job-1/output/model.tar.gz"
    assert done.model_artifacts == model
    got = members(store, model)
    assert got["rows"] == b"1,2\n3,4\n"
    assert json.loads(got["hp.json"]) == {"epochs": "3"}
    output = members(store, "s3://out/models/s3job-s3job-1/output/output.tar.gz")
    assert output == {"report.txt": b"done\n"}
    assert cluster.job("s3job").attempts[-1].model_artifacts == model


async def test_a_sharded_channel_splits_its_objects_across_the_gang(
    contract_cluster: Cluster, store: ObjectStore
) -> None:
    cluster = contract_cluster
    names = [f"part-{i}" for i in range(5)]
    put_tree(store, "s3://data/shards/", {name: name.encode() for name in names})
    seen = cluster.tmp / "seen"
    seen.mkdir()
    body = request(
        f"ls /opt/ml/input/data/train > {seen}/$QM_HOST; getent hosts algo-1 algo-2 >> "
        f"{seen}/$QM_HOST.hosts",
        InputDataConfig=[
            channel("train", "s3://data/shards/", S3DistributionType="ShardedByS3Key")
        ],
        ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
    )
    async with cluster.agent(settings(cluster, "h1")), cluster.agent(settings(cluster, "h2")):
        await cluster.until_host("h1")
        await cluster.until_host("h2")
        await cluster.submit("gang", body)
        await cluster.dispatch("gang", hosts=("h1", "h2"))
        await cluster.until_status("gang", JobStatus.SUCCEEDED, timeout=60)

    one, two = ((seen / host).read_text().split() for host in ("h1", "h2"))
    assert sorted(one + two) == names and not set(one) & set(two)
    assert len(one) == 3 and len(two) == 2  # algo-1 takes objects 0, 2, 4
    for host in ("h1", "h2"):
        assert sorted((seen / f"{host}.hosts").read_text().split()) == sorted(
            ["127.0.0.1", "algo-1", "127.0.0.1", "algo-2"]
        )


async def test_a_manifest_file_names_the_objects_of_a_channel(
    contract_cluster: Cluster, store: ObjectStore
) -> None:
    cluster = contract_cluster
    put_tree(store, "s3://data/man/", {"x/1.txt": b"one", "x/2.txt": b"two", "x/3.txt": b"no"})
    manifest = json.dumps([{"prefix": "s3://data/man/"}, "x/1.txt", "x/2.txt"]).encode()
    put_tree(store, "s3://data/", {"man.manifest": manifest})
    out = cluster.tmp / "listing"
    body = request(
        f"cd /opt/ml/input/data/m && find . -type f | sort > {out}",
        InputDataConfig=[channel("m", "s3://data/man.manifest", S3DataType="ManifestFile")],
    )
    async with cluster.agent(settings(cluster)):
        await cluster.until_host()
        await cluster.run("manifest", body)
        await cluster.until_status("manifest", JobStatus.SUCCEEDED, timeout=60)
    assert out.read_text().split() == ["./x/1.txt", "./x/2.txt"]


async def test_the_failure_file_is_the_reason_and_outputs_still_go_up(
    contract_cluster: Cluster, store: ObjectStore
) -> None:
    cluster = contract_cluster
    script = (
        "echo partial > /opt/ml/model/w; "
        "printf 'CUDA out of memory' > /opt/ml/output/failure; exit 2"
    )
    body = request(script, OutputDataConfig={"S3OutputPath": "s3://out/failed"})
    async with cluster.agent(settings(cluster)):
        await cluster.until_host()
        await cluster.run("oom", body)
        failed = await cluster.until_reported("oom", ev.JobFailed, timeout=60)
    assert failed.reason == "AlgorithmError: CUDA out of memory"
    assert failed.failure_class is ev.FailureClass.ALGORITHM_ERROR
    assert members(store, failed.model_artifacts) == {"w": b"partial\n"}


async def test_a_stopped_job_still_uploads_its_model(
    contract_cluster: Cluster, store: ObjectStore
) -> None:
    cluster = contract_cluster
    ready = cluster.tmp / "ready"
    script = f"echo w > /opt/ml/model/w; touch {ready}; sleep 600"
    body = request(script, OutputDataConfig={"S3OutputPath": "s3://out/stopped"})
    async with cluster.agent(settings(cluster)):
        await cluster.until_host()
        await cluster.run("stopme", body)
        await cluster.until("the job started", ready.exists, timeout=30)
        await cluster.terminate("stopme")
        stopped = await cluster.until_reported("stopme", ev.JobStopConfirmed, timeout=60)
    assert stopped.model_artifacts.endswith("/stopme-stopme-1/output/model.tar.gz")
    assert members(store, stopped.model_artifacts) == {"w": b"w\n"}


async def test_a_missing_bucket_fails_the_attempt_as_the_clients_error(
    contract_cluster: Cluster,
) -> None:
    cluster = contract_cluster
    body = request("true", InputDataConfig=[channel("train", "s3://no-such-bucket/x/")])
    async with cluster.agent(settings(cluster)):
        await cluster.until_host()
        await cluster.run("nobucket", body)
        failed = await cluster.until_reported("nobucket", ev.JobFailed, timeout=60)
    assert failed.failure_class is ev.FailureClass.CLIENT_ERROR
    assert "'train'" in failed.reason and "s3://no-such-bucket/x/" in failed.reason


async def test_a_store_that_does_not_answer_is_the_hosts_fault(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stage_module, "UNAVAILABLE_PAUSES_S", (0.1,))
    dead = S3Access(endpoint_url="http://127.0.0.1:9", access_key_id="k", secret_access_key="s")
    roles = role_map_file(cluster.tmp / "dead-roles.json", dead)
    body = request("true", InputDataConfig=[channel("train", "s3://data/x/")])
    async with cluster.agent(cluster.settings(roles_file=str(roles))):
        await cluster.until_host()
        await cluster.run("unreachable", body)
        failed = await cluster.until_reported("unreachable", ev.JobFailed, timeout=120)
    assert failed.failure_class is ev.FailureClass.INFRASTRUCTURE_ERROR
    assert "object store unavailable" in failed.reason
    # The host's fault: retried without using up the job's attempts.
    assert cluster.job("unreachable").attempts_used == 1


def test_a_reused_host_downloads_only_the_objects_that_changed(
    tmp_path: Path, store: ObjectStore, s3: S3Access
) -> None:
    put_tree(store, "s3://data/reuse/", {f"f{i}": b"v1" * 1000 for i in range(4)})
    body = {"RoleArn": ROLE, "InputDataConfig": [channel("train", "s3://data/reuse/")]}
    job = dispatched_job(body)
    root = tmp_path / "chain"
    root.mkdir()
    contract = build_contract(
        job,
        body,
        host="h1",
        instance_type="ml.g5.xlarge",
        ml_dir=str(root / "ml"),
        hosts_file=str(root / "hosts"),
    )
    access = RoleMap(roles={ROLE: s3}).access(ROLE)

    def staged() -> int:
        return prepare(contract, access, addresses={}, network_interface="lo").bytes

    assert staged() == 8000
    assert staged() == 0  # the same ETags: nothing moves
    put_tree(store, "s3://data/reuse/", {"f1": b"v2"})
    store.delete(parse_s3_uri("s3://data/reuse/f3"))
    assert staged() == 2
    data = root / "ml" / "input" / "data" / "train"
    assert sorted(p.name for p in data.iterdir()) == ["f0", "f1", "f2"]
    assert (data / "f1").read_bytes() == b"v2"


async def test_checkpoints_follow_a_preempted_job_to_another_host(
    contract_cluster: Cluster, store: ObjectStore
) -> None:
    """Host A writes checkpoints; the job is preempted and resumes on host B from S3,
    having lost only what came after its last upload."""
    cluster = contract_cluster
    progress = cluster.tmp / "progress"
    progress.mkdir()
    # Resume from the checkpoint (if any), then count steps, checkpointing each one.
    script = (
        "cd /opt/ml/checkpoints; step=$(cat step 2>/dev/null || echo 0); "
        f'echo "$QM_HOST starts at $step" >> {progress}/log; '
        "while true; do step=$((step+1)); echo $step > step.tmp; mv step.tmp step; "
        f"echo $step > {progress}/$QM_HOST; sleep 0.5; done"
    )
    body = request(script, CheckpointConfig={"S3Uri": "s3://out/ckpt/job1"})
    async with cluster.agent(settings(cluster, "h1")), cluster.agent(settings(cluster, "h2")):
        await cluster.until_host("h1")
        await cluster.until_host("h2")
        await cluster.submit("ckpt", body)
        await cluster.dispatch("ckpt", hosts=("h1",))
        await cluster.until_reported("ckpt", ev.JobCheckpointed, timeout=60)
        await cluster.preempt("ckpt")
        await cluster.until_status("ckpt", JobStatus.RUNNABLE, timeout=60)
        reached = int((progress / "h1").read_text())
        checkpointed = int(store.get_bytes(parse_s3_uri("s3://out/ckpt/job1/step")))
        await cluster.dispatch("ckpt", hosts=("h2",))  # kept off host A
        await cluster.until("it resumed on h2", lambda: (progress / "h2").exists(), timeout=60)
        await cluster.terminate("ckpt")
        await cluster.until_status("ckpt", JobStatus.FAILED, timeout=60)
        # FAILED comes with the termination; the job stops after: wait for h2 to say so
        # (the agents stop when this block ends, and a job outlives its agent).
        await cluster.until(
            "h2 stopped it", lambda: "h2" in cluster.job("ckpt").ended_hosts, timeout=60
        )

    starts = (progress / "log").read_text().splitlines()
    assert starts[0] == "h1 starts at 0"
    resumed = int(starts[1].split()[-1])
    assert starts[1].startswith("h2 starts at ")
    # The final flush after SIGTERM sent the last step: nothing was lost.
    assert resumed == checkpointed == reached
    uploads = cluster.reported("ckpt", ev.JobCheckpointed)
    assert uploads and all(u.bytes >= 0 for u in uploads)


async def test_checkpoint_files_written_before_the_first_scan_go_up_and_restored_ones_do_not(
    contract_cluster: Cluster, store: ObjectStore
) -> None:
    """A file the job writes at once and never touches again is uploaded (the first
    round must not take it for what the restore left); a restored file the next job
    leaves alone is not sent again."""
    cluster = contract_cluster
    config = {"CheckpointConfig": {"S3Uri": "s3://out/ckpt/early/"}}
    first = request("mkdir -p /opt/ml/checkpoints; echo early > /opt/ml/checkpoints/a", **config)
    second = request(
        'test "$(cat /opt/ml/checkpoints/a)" = early'
        " && echo later > /opt/ml/checkpoints/b && sleep 3",
        **config,
    )
    async with cluster.agent(settings(cluster)):
        await cluster.until_host()
        await cluster.run("early1", first)
        await cluster.until_reported("early1", ev.JobSucceeded, timeout=60)
        assert store.get_bytes(parse_s3_uri("s3://out/ckpt/early/a")) == b"early\n"
        assert [u.bytes for u in cluster.reported("early1", ev.JobCheckpointed)] == [6]
        await cluster.run("early2", second)
        await cluster.until_reported("early2", ev.JobSucceeded, timeout=60)
    assert store.get_bytes(parse_s3_uri("s3://out/ckpt/early/b")) == b"later\n"
    # Only b went up in the second job's rounds: a came back from the restore as it was.
    assert sum(u.bytes for u in cluster.reported("early2", ev.JobCheckpointed)) == 6
    manifest = json.loads(store.get_bytes(parse_s3_uri("s3://out/ckpt/early/.qm-checkpoint.json")))
    assert sorted(manifest) == ["a", "b"]
