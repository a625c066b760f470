"""SubmitServiceJob over the AWS-compatible endpoint against its baselines, in one run
(issue 25, speed).

Prints, over several rounds (min/median/max), sequential and 64 in flight:
- a no-op on the same HTTP stack: the endpoint's own aiohttp server, settings, body
  read and SigV4 verification (`NoopEndpoint`, a second `AwsEndpoint` on another port
  whose route answers a fixed small JSON instead of dispatching);
- SubmitServiceJob over HTTP (rest-json, SigV4), through the endpoint;
- SubmitServiceJob over gRPC on the same admission (plaintext, no token: the HTTP
  side's SigV4 check has no counterpart there);
with the ratios HTTP submit / no-op and HTTP submit / gRPC submit, each of the same
round, and the admission process's CPU per call of each (read from /proc: a figure
the machine's load moves less than rates), and the client's: where the client's CPU
per call times the rate nears one core, the client is what limits that rate.

Admission runs in this process (`aws_admission`: nats-server and Postgres of its
own, projector in-process); the client runs in a process of its own, so its CPU is
not in the server's. HTTP requests are signed before each timed run (a small
pure-Python SigV4 signer, each request with its own job name and the current time),
so signing is not timed; the client sends them with aiohttp. Jobs go to a share
whose instance type no host has, and no scheduler runs: the figures are admission's.
The order of the three calls turns each round. Asserts nothing.

    python bench/aws_bench.py [--rounds 5] [--calls 2000] [--sequential-calls 300]
        [--profile submit|noop]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import hmac
import json
import multiprocessing
import os
import pstats
import tempfile
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

import aiohttp
import grpc
from aiohttp import web
from aws_admission import QUEUE, REGION, SHARE, UNIT, Admission, admission
from submit_bench import rate, ratio, show

from qm_admission.aws.server import AwsEndpoint
from qm_admission.consistency import Consistency
from qm_admission.screening import request_screen
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.auth import Principal
from quartermaster.auth.access_keys import KeyRing

KINDS = ("noop", "http", "grpc")
LABELS = {
    "noop": "no-op on the HTTP stack (SigV4)",
    "http": "SubmitServiceJob over HTTP (SigV4)",
    "grpc": "SubmitServiceJob over gRPC",
}
NOOP_ANSWER = json.dumps({"jobArn": "arn:aws:batch:::job/0", "jobName": "x", "jobId": "0"})
PAYLOAD = json.dumps(
    {
        "ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1},
        "AlgorithmSpecification": {"ContainerEntrypoint": ["python", "train.py"]},
        "HyperParameters": {f"param_{i}": "x" * 24 for i in range(24)},
    }
)
SUBMIT_PATH = "/v1/submitservicejob"


class NoopEndpoint(AwsEndpoint):
    """The endpoint's app and server settings, body read and SigV4 check; its route
    answers a fixed JSON (no JSON parse, no RPC)."""

    async def _route(
        self,
        request: web.Request,
        family: str,
        body: bytes,
        signed: tuple[Principal, str],
        request_id: str,
    ) -> web.StreamResponse:
        return web.Response(
            text=NOOP_ANSWER,
            content_type="application/json",
            headers={"x-amzn-RequestId": request_id},
        )


def noop_endpoint(started: Admission) -> NoopEndpoint:
    screen = request_screen("")
    return NoopEndpoint(
        rpcs={},
        screen=screen,
        consistency=cast(Consistency, None),  # never read: the route answers before
        seal=screen.seal,
        keys=KeyRing(started.keys_dir),
        roles=lambda: None,
    )


# ---- the client (a process of its own) ----------------------------------------------


def submit_body(name: str) -> bytes:
    return json.dumps(
        {
            "jobName": name,
            "jobQueue": QUEUE,
            "serviceJobType": "SAGEMAKER_TRAINING",
            "quotaShareName": SHARE,
            "serviceRequestPayload": PAYLOAD,
        }
    ).encode()


class Signer:
    """SigV4 as botocore signs a rest-json POST (host and x-amz-date signed)."""

    def __init__(self, key: str, secret: str, service: str = "batch") -> None:
        self.key, self.secret, self.service = key, secret, service
        self._keys: dict[str, bytes] = {}

    def _signing_key(self, date: str) -> bytes:
        if date not in self._keys:
            key = hmac.new(b"AWS4" + self.secret.encode(), date.encode(), hashlib.sha256).digest()
            for part in (REGION, self.service, "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._keys[date] = key
        return self._keys[date]

    def headers(self, host: str, path: str, body: bytes, now: float) -> dict[str, str]:
        amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        date = amz_date[:8]
        canonical = "\n".join(
            (
                "POST",
                path,
                "",
                f"host:{host}\nx-amz-date:{amz_date}\n",
                "host;x-amz-date",
                hashlib.sha256(body).hexdigest(),
            )
        )
        scope = f"{date}/{REGION}/{self.service}/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n" + (
            hashlib.sha256(canonical.encode()).hexdigest()
        )
        signature = hmac.new(self._signing_key(date), to_sign.encode(), hashlib.sha256).hexdigest()
        return {
            "Host": host,
            "X-Amz-Date": amz_date,
            "Content-Type": "application/json",
            "Authorization": (
                f"AWS4-HMAC-SHA256 Credential={self.key}/{scope}, "
                f"SignedHeaders=host;x-amz-date, Signature={signature}"
            ),
        }


class Client:
    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.signer = Signer(config["key"], config["secret"])
        self.server_pid = config["server_pid"]
        self.tick = os.sysconf("SC_CLK_TCK")
        self.round = 0

    def server_cpu(self) -> float:
        stat = Path(f"/proc/{self.server_pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / self.tick

    async def __aenter__(self) -> Client:
        connector = aiohttp.TCPConnector(limit=0)
        self.session = aiohttp.ClientSession(connector=connector)
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{self.config['grpc_port']}")
        self.jobs = rpc.ServiceJobsStub(self.channel)  # type: ignore[no-untyped-call]
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.session.close()
        await self.channel.close()

    def http_call(self, port: int, calls: int, prefix: str) -> Callable[[int], Awaitable[object]]:
        """Requests signed now, one per call, sent by index."""
        host = f"127.0.0.1:{port}"
        url = f"http://{host}{SUBMIT_PATH}"
        now = time.time()
        signed = []
        for i in range(calls):
            body = submit_body(f"{prefix}{i}")
            signed.append((body, self.signer.headers(host, SUBMIT_PATH, body, now)))

        async def one(i: int) -> object:
            body, headers = signed[i]
            async with self.session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{response.status}: {await response.text()}")
            return None

        return one

    def grpc_call(self, calls: int, prefix: str) -> Callable[[int], Awaitable[object]]:
        requests = [
            pb.SubmitServiceJobRequest(
                job_name=f"{prefix}{i}",
                job_queue=QUEUE,
                service_job_type="SAGEMAKER_TRAINING",
                quota_share_name=SHARE,
                service_request_payload=PAYLOAD,
            )
            for i in range(calls)
        ]

        async def one(i: int) -> object:
            return await self.jobs.SubmitServiceJob(requests[i], timeout=30)

        return one

    async def measure(self, kind: str, in_flight: int, calls: int) -> tuple[float, float, float]:
        """(calls/s, admission's and this client's CPU ms per call) of one timed run."""
        self.round += 1
        prefix = f"{kind}{in_flight}r{self.round}-"
        if kind == "grpc":
            one = self.grpc_call(calls, prefix)
        else:
            port = self.config["noop_port" if kind == "noop" else "aws_port"]
            one = self.http_call(port, calls, prefix)
        cpu, own = self.server_cpu(), time.process_time()
        per_second = await rate(calls, in_flight, one)
        server = (self.server_cpu() - cpu) * 1e3 / calls
        return per_second, server, (time.process_time() - own) * 1e3 / calls


async def client_rounds(config: dict[str, Any]) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}
    async with Client(config) as client:
        for kind in KINDS:  # warm up: connections, caches, the first jobs of the share
            await client.measure(kind, 64, 200)
        for r in range(config["rounds"]):
            order = KINDS[r % 3 :] + KINDS[: r % 3]
            for in_flight, calls in ((1, config["sequential_calls"]), (64, config["calls"])):
                for kind in order:
                    per_second, cpu, own = await client.measure(kind, in_flight, calls)
                    figures.setdefault(f"{kind} {in_flight}", []).append(per_second)
                    figures.setdefault(f"{kind} cpu {in_flight}", []).append(cpu)
                    figures.setdefault(f"{kind} client cpu {in_flight}", []).append(own)
    return figures


def client_main(config: dict[str, Any], out: Connection) -> None:
    out.send(asyncio.run(client_rounds(config)))
    out.close()


def profile_main(config: dict[str, Any], out: Connection) -> None:
    """The profiled run's load: `--calls` calls of one kind, 64 in flight."""

    async def load() -> None:
        async with Client(config) as client:
            await client.measure(config["profile"], 64, config["calls"])

    asyncio.run(load())
    out.send({})
    out.close()


# ---- the server (this process) -------------------------------------------------------


async def serve(config: dict[str, Any], target: Callable[..., None]) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="qm-aws-bench-") as tmp:
        async with admission(Path(tmp)) as started:
            await started.seed_queue()
            noop = noop_endpoint(started)
            noop_port = await noop.start("127.0.0.1", 0, None)
            try:
                config = {
                    **config,
                    "key": started.key,
                    "secret": started.secret,
                    "aws_port": started.aws_port,
                    "noop_port": noop_port,
                    "grpc_port": started.grpc_port,
                    "server_pid": os.getpid(),
                }
                return await in_client_process(config, target)
            finally:
                await noop.stop()


async def in_client_process(
    config: dict[str, Any], target: Callable[..., None]
) -> dict[str, list[float]]:
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=target, args=(config, send))
    process.start()
    profiler = cProfile.Profile() if config.get("profile") else None
    if profiler is not None:
        profiler.enable()
    try:
        figures: dict[str, list[float]] = await asyncio.to_thread(receive.recv)
    finally:
        if profiler is not None:
            profiler.disable()
        await asyncio.to_thread(process.join)
    if profiler is not None:
        stats = pstats.Stats(profiler).strip_dirs().sort_stats("tottime")
        print(f"-- admission's profile under {config['profile']}, 64 in flight (by own time)")
        stats.print_stats(30)
        stats.sort_stats("cumulative").print_stats(40)
    return figures


def report(figures: dict[str, list[float]], rounds: int) -> None:
    print(f"-- {rounds} rounds; jobs (or no-op calls) per second, admission CPU per call")
    for in_flight in (1, 64):
        for kind in KINDS:
            show(f"{LABELS[kind]}, {in_flight} in flight", figures[f"{kind} {in_flight}"], "/s")
        ratio(
            f"  HTTP submit / no-op, {in_flight} in flight",
            figures[f"http {in_flight}"],
            figures[f"noop {in_flight}"],
        )
        ratio(
            f"  HTTP submit / gRPC submit, {in_flight} in flight",
            figures[f"http {in_flight}"],
            figures[f"grpc {in_flight}"],
        )
    for in_flight in (1, 64):
        for kind in KINDS:
            show(
                f"admission CPU per call: {kind}, {in_flight} in flight",
                figures[f"{kind} cpu {in_flight}"],
                "ms",
                ".3f",
            )
            show("  the client's", figures[f"{kind} client cpu {in_flight}"], "ms", ".3f")
        # Rates are the inverse of CPU per call where admission's CPU is what runs out.
        ratio(
            f"  admission CPU no-op / HTTP submit, {in_flight} in flight",
            figures[f"noop cpu {in_flight}"],
            figures[f"http cpu {in_flight}"],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000, help="calls per run, 64 in flight")
    parser.add_argument("--sequential-calls", type=int, default=300)
    parser.add_argument(
        "--profile",
        choices=("noop", "http", "grpc"),
        help="instead of the rounds: cProfile admission under one kind of call, 64 in flight",
    )
    args = parser.parse_args()
    config: dict[str, Any] = {
        "rounds": args.rounds,
        "calls": args.calls,
        "sequential_calls": args.sequential_calls,
        "profile": args.profile,
    }
    if args.profile:
        asyncio.run(serve(config, profile_main))
        return
    report(asyncio.run(serve(config, client_main)), args.rounds)


if __name__ == "__main__":
    main()
