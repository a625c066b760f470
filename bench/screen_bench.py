"""Cost of the request screen per call: the descriptor walk, the payload walk, the token seal.

    python bench/screen_bench.py [--rounds 200]

Pure CPU, no servers. Prints min/median/max microseconds per call; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from qm_admission.paging import PageTokenSeal
from qm_admission.validation.hostile import check_json, check_request
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

METHOD = "/qm.v1.ServiceJobs/ListServiceJobs"


def training_payload(env_vars: int) -> str:
    return json.dumps(
        {
            "RoleArn": "arn:aws:iam::123456789012:role/train",
            "AlgorithmSpecification": {
                "TrainingImage": "repo/image:1",
                "TrainingInputMode": "File",
            },
            "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": 2},
            "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
            "HyperParameters": {f"h{i}": str(i) for i in range(20)},
            "Environment": {f"VAR_{i}": "x" * 64 for i in range(env_vars)},
            "VpcConfig": {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1", "subnet-2"]},
        }
    )


def submission(env_vars: int) -> pb.SubmitServiceJobRequest:
    return pb.SubmitServiceJobRequest(
        job_name="train",
        job_queue="q",
        quota_share_name="QS1",
        service_request_payload=training_payload(env_vars),
        retry_strategy=pb.ServiceJobRetryStrategy(
            attempts=3,
            evaluate_on_exit=[pb.ServiceJobEvaluateOnExit(action=1, on_exit_code="137")],
        ),
        tags={f"k{i}": "v" for i in range(10)},
        client_token="token-1",
    )


def measure(label: str, rounds: int, work: Callable[[], object]) -> None:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        work()
        times.append((time.perf_counter() - began) * 1e6)
    print(
        f"{label + ':':<52}min {min(times):>9.1f}  median {statistics.median(times):>9.1f}  "
        f"max {max(times):>9.1f} us"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    rounds = parser.parse_args().rounds
    one = submission(env_vars=10)
    batch = pb.SubmitServiceJobsRequest(jobs=[one] * 1000)
    big_payload = json.loads(training_payload(env_vars=3000))  # about 250 KB
    seal = PageTokenSeal(b"k" * 32)
    token = seal.seal(METHOD, "WyJqb2JzIiwxNzAwMDAwMDAwLjUsImFiYzEyMyJd")

    measure("check_request, one submission", rounds, lambda: check_request(one))
    measure(
        "check_request, SubmitServiceJobs x1000", max(rounds // 20, 5), lambda: check_request(batch)
    )
    measure(
        f"check_json, payload of {len(json.dumps(big_payload)) // 1024} KB",
        max(rounds // 10, 5),
        lambda: check_json(big_payload, "service_request_payload"),
    )
    measure("open a sealed page token", rounds, lambda: seal.open(METHOD, token))


if __name__ == "__main__":
    main()
