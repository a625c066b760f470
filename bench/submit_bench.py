"""Durable submissions against their baselines, measured in the same run (issue #10 item 3).

Prints, each over several rounds (min/median/max):
- a no-op unary gRPC call (health Check on the same admission server, through the same
  TLS, token and interceptors) and durable SubmitServiceJob, sequential and 64 in
  flight, with the ratio submit / no-op;
- bulk SubmitServiceJobs (1000 jobs per call) in jobs/s against raw nats-py
  `publish_async` of one job-sized message per job to a JetStream stream on the same
  nats-server, with the ratio.

Jobs go to a share whose instance type no host has, so the figures are admission's
(durable append, group commit) and not scheduling's. Asserts nothing.

    python bench/submit_bench.py [--rounds 3] [--calls 1000] [--insecure]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import nats
from grpc_health.v1 import health_pb2, health_pb2_grpc

from quartermaster import events as ev
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.client import Quartermaster
from quartermaster.client.credentials import find_credentials
from quartermaster.embedded import EmbeddedNats
from quartermaster.eventlog import encode_batch
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread

UNIT = "ml.p5.48xlarge"  # no host has it: submitted jobs stay queued
PAYLOAD = json.dumps(
    {
        "ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1},
        "AlgorithmSpecification": {"ContainerEntrypoint": ["python", "train.py"]},
        "HyperParameters": {f"param_{i}": "x" * 24 for i in range(24)},
    }
)


def channel(address: str, credentials_dir: Path | None, insecure: bool) -> grpc.aio.Channel:
    creds = find_credentials(credentials_dir=credentials_dir, insecure=insecure)
    if creds.insecure or not creds.ca_pem:
        return grpc.aio.insecure_channel(address)
    tls = grpc.ssl_channel_credentials(root_certificates=creds.ca_pem)
    token = grpc.access_token_call_credentials(creds.token)
    return grpc.aio.secure_channel(address, grpc.composite_channel_credentials(tls, token))


async def rate(calls: int, in_flight: int, one: Callable[[int], Awaitable[object]]) -> float:
    """Calls per second with `in_flight` callers sharing `calls` calls."""
    counter = iter(range(calls))

    async def caller() -> None:
        for i in counter:
            await one(i)

    began = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(in_flight)))
    return calls / (time.perf_counter() - began)


def submit_request(name: str) -> pb.SubmitServiceJobRequest:
    return pb.SubmitServiceJobRequest(
        job_name=name, job_queue="bulk", quota_share_name="BULK", service_request_payload=PAYLOAD
    )


async def raw_publish_rate(nats_url: str, messages: int, size: int) -> float:
    """Raw nats-py `publish_async` of `messages` messages, waiting for every ack."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="RAWBENCH", subjects=["rawbench.>"])
        body = b"x" * size
        began = time.perf_counter()
        acks = [await js.publish_async("rawbench.jobs", body) for _ in range(messages)]
        await asyncio.gather(*acks)
        elapsed = time.perf_counter() - began
        await js.delete_stream("RAWBENCH")
        return messages / elapsed
    finally:
        await nc.close()


def show(label: str, values: list[float], unit: str) -> None:
    print(
        f"{label:<52} min {min(values):>9,.0f}  median {statistics.median(values):>9,.0f}"
        f"  max {max(values):>9,.0f} {unit}"
    )


def ratio(label: str, numerator: list[float], denominator: list[float]) -> None:
    values = [n / d for n, d in zip(numerator, denominator, strict=True)]
    print(
        f"{label:<52} min {min(values):>9.0%}  median {statistics.median(values):>9.0%}"
        f"  max {max(values):>9.0%}"
    )


async def measure(stack: StackThread, rounds: int, calls: int, insecure: bool) -> None:
    ch = channel(stack.address, stack.credentials_dir, insecure)
    jobs = rpc.ServiceJobsStub(ch)  # type: ignore[no-untyped-call]
    health = health_pb2_grpc.HealthStub(ch)
    check = health_pb2.HealthCheckRequest()
    figures: dict[str, list[float]] = {}
    for r in range(rounds):
        for in_flight in (1, 64):
            prefix = f"s{r}-{in_flight}-"

            async def noop_call(_: int) -> object:
                return await health.Check(check, timeout=30)

            async def submit_call(i: int, prefix: str = prefix) -> object:
                return await jobs.SubmitServiceJob(submit_request(f"{prefix}{i}"), timeout=30)

            noop = await rate(calls, in_flight, noop_call)
            submit = await rate(calls, in_flight, submit_call)
            figures.setdefault(f"noop {in_flight}", []).append(noop)
            figures.setdefault(f"submit {in_flight}", []).append(submit)
        bulk_calls = 5
        began = time.perf_counter()
        for b in range(bulk_calls):
            batch = [submit_request(f"b{r}-{b}-{i}") for i in range(1000)]
            await jobs.SubmitServiceJobs(pb.SubmitServiceJobsRequest(jobs=batch), timeout=60)
        figures.setdefault("bulk", []).append(bulk_calls * 1000 / (time.perf_counter() - began))
    await ch.close()
    for in_flight in (1, 64):
        show(f"no-op unary call, {in_flight} in flight", figures[f"noop {in_flight}"], "calls/s")
        show(f"SubmitServiceJob, {in_flight} in flight", figures[f"submit {in_flight}"], "jobs/s")
        ratio(
            f"  SubmitServiceJob / no-op, {in_flight} in flight",
            figures[f"submit {in_flight}"],
            figures[f"noop {in_flight}"],
        )
    show("SubmitServiceJobs, 1000 per call", figures["bulk"], "jobs/s")
    # The baseline: a plaintext nats-server of its own (no TLS, no users), one message of
    # a submitted job's size per job; stricter than the stack's secured bus.
    with tempfile.TemporaryDirectory() as store, EmbeddedNats(store) as server:
        size = len(encode_batch([_a_submitted_event()]))
        raw = [await raw_publish_rate(server.url, 5000, size) for _ in range(rounds)]
    show(f"raw publish_async, {size}-byte messages", raw, "msg/s")
    ratio("  SubmitServiceJobs / raw publish_async", figures["bulk"], raw)


def _a_submitted_event() -> ev.JobSubmitted:
    return ev.JobSubmitted(
        at=time.time(),
        job_id="0" * 32,
        job_name="b0-0-0",
        job_queue="bulk",
        quota_share="BULK",
        instance_type=UNIT,
        payload=PAYLOAD,
        principal="admin",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every figure")
    parser.add_argument("--calls", type=int, default=1000, help="unary calls per figure")
    parser.add_argument("--insecure", action="store_true", help="plaintext stack (no TLS/tokens)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = StackSettings(data_dir=Path(tmp), nodes=0, grpc_port=0, secure=not args.insecure)
        with StackThread(settings) as stack:
            c = Quartermaster(
                stack.address, credentials_dir=stack.credentials_dir, insecure=args.insecure
            )
            c.create_service_environment("env-bulk", {UNIT: 1})
            c.create_scheduling_policy("fifo")
            c.create_job_queue("bulk", "env-bulk", "fifo")
            c.create_quota_share("bulk", "BULK", {UNIT: 1}, "LEND")
            asyncio.run(measure(stack, args.rounds, args.calls, args.insecure))


if __name__ == "__main__":
    main()
