"""The training platform's side of the many-host run: it runs on a host of its own.

    python tests/multihost/driver.py CONFIG.json

Through the Python client only (`quartermaster.client`), against every admission
replica at once (gRPC picks a live one): create the environment, queue and share,
wait for the hosts, then submit the jobs in bulk chunks (`SubmitServiceJobs`), never
more than `window` unfinished, each with a client token, so a chunk retried after an
admission replica died is not submitted twice. It writes its progress to a JSON file
as it goes (the harness injects faults on it) and, once every job is terminal, every
job's status and attempts to the result file.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client import Quartermaster, training_job
from quartermaster.client.connection import QuartermasterError
from quartermaster.client.training_queue import status_name

T = TypeVar("T")
RETRIED = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.INTERNAL,  # a replica dying mid-call may answer so
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.CANCELLED,
}
TERMINAL = ("SUCCEEDED", "FAILED")


def retried(call: Callable[[], T], what: str, timeout_s: float = 120.0) -> T:
    """`call()` until it answers; transient failures (a replica restarting) are retried."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except QuartermasterError as err:
            if err.code not in RETRIED or time.monotonic() > deadline:
                raise
            print(f"{time.time():.3f} {what}: {err.code.name}, retrying", flush=True)
            time.sleep(0.3)


def configure(qm: Quartermaster, cfg: dict[str, Any]) -> None:
    unit, hosts = cfg["unit"], cfg["hosts"]
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("environment", lambda: qm.create_service_environment("env", {unit: hosts})),
        ("policy", lambda: qm.create_scheduling_policy("fifo")),
        ("queue", lambda: qm.create_job_queue("q", "env", "fifo")),
        ("share", lambda: qm.create_quota_share("q", "A", {unit: hosts})),
    ]
    for what, step in steps:
        try:
            retried(step, what)
        except QuartermasterError as err:
            if err.code is not grpc.StatusCode.ALREADY_EXISTS:
                raise


def job_request(cfg: dict[str, Any], name: str) -> pb.SubmitServiceJobRequest:
    command = [
        "/bin/sh",
        "-c",
        'echo "$QM_HOST" > "$QM_MARKERS/$QM_JOB_ID.$QM_ATTEMPT.$QM_HOST.$$";'
        f" sleep {cfg['job_seconds']}",
    ]
    payload = training_job(
        command=command, instance_type=cfg["unit"], environment={"QM_MARKERS": cfg["markers"]}
    )
    request = pb.SubmitServiceJobRequest(
        job_name=name,
        job_queue="q",
        quota_share_name="A",
        service_job_type="SAGEMAKER_TRAINING",
        service_request_payload=json.dumps(payload),
        client_token=name,
    )
    request.retry_strategy.attempts = 1  # a job that used an attempt on a lost host fails
    return request


def submit_chunk(qm: Quartermaster, cfg: dict[str, Any], names: list[str]) -> dict[str, str]:
    request = pb.SubmitServiceJobsRequest(jobs=[job_request(cfg, n) for n in names])
    response = retried(lambda: qm.call(qm.jobs.SubmitServiceJobs, request), "submit")
    ids = {}
    for result in response.results:
        if result.HasField("error"):
            raise QuartermasterError.from_api_error(result.error, names[result.index])
        ids[result.job.job_name] = result.job.job_id
    return ids


def count(qm: Quartermaster, status: str) -> int:
    return len(retried(lambda: qm.list_jobs("q", status), f"list {status}"))


def main(config_path: str) -> None:
    cfg = json.loads(Path(config_path).read_text())
    progress_file = Path(cfg["progress"])
    qm = Quartermaster(cfg["admission"], timeout=30, insecure=True)
    configure(qm, cfg)
    while len(retried(qm.list_nodes, "nodes")) < cfg["hosts"]:
        time.sleep(0.2)
    names = [f"job-{i:05d}" for i in range(cfg["jobs"])]
    ids: dict[str, str] = {}
    began = time.time()
    done = 0
    finished_at = None
    while finished_at is None:
        while len(ids) < len(names) and len(ids) - done < cfg["window"]:
            chunk = names[len(ids) : len(ids) + cfg["chunk"]]
            ids.update(submit_chunk(qm, cfg, chunk))
        succeeded, failed = count(qm, "SUCCEEDED"), count(qm, "FAILED")
        done = succeeded + failed
        progress = {"submitted": len(ids), "succeeded": succeeded, "failed": failed, "done": done}
        progress_file.write_text(json.dumps({**progress, "at": time.time()}))
        if done >= len(names):
            finished_at = time.time()
        elif time.time() - began > cfg["timeout_s"]:
            break
        else:
            time.sleep(1.0)  # listing every job is not free for admission and Postgres
    jobs = {}
    for name, job_id in ids.items():
        job = retried(lambda job_id=job_id: qm.describe_job(job_id), "describe")  # type: ignore[misc]
        jobs[name] = {
            "job_id": job_id,
            "status": status_name(job.status),
            "status_reason": job.status_reason,
            "attempts": [
                {"hosts": list(a.host_ids), "status_reason": a.status_reason} for a in job.attempts
            ],
        }
    result = {
        "began": began,
        "finished": finished_at,
        "jobs": jobs,
        "terminal": sum(1 for j in jobs.values() if j["status"] in TERMINAL),
    }
    Path(cfg["result"]).write_text(json.dumps(result))
    qm.close()


if __name__ == "__main__":
    main(sys.argv[1])
