"""Durable submissions against their baselines, measured in the same run (issue #10 item 3).

Prints, each over several rounds (min/median/max), for each set of parts (`--parts`):
- a no-op unary gRPC call (health Check on the same admission server, through the same
  TLS, token and interceptors) and durable SubmitServiceJob, sequential and 64 in
  flight, with the ratio submit / no-op;
- the stack loop's callbacks per call of both (asyncio handles run: task steps, I/O
  and timer callbacks), counted once after the timed rounds: a figure the machine's
  load does not move;
- a lone call's latency (1 in flight, p50 per round) of both, and the time the lone
  submit spent in group commit (queued, planned, appended, acked), which must hold no
  linger window;
- bulk SubmitServiceJobs (1000 jobs per call) in jobs/s against raw nats-py
  `publish_async` of one job-sized message per job to a JetStream stream on the same
  nats-server, with the ratio.

Parts: `all` is `qm up` (scheduler, warm pool, admission and projector on one asyncio
loop, beside this client); `admission` stops the scheduler and warm pool first, so the
process holds what `qm-admission` runs on its own (gRPC, log follower, projector).
The client runs in a process of its own by default (`--client process`), as a
platform's would: its calls then take no GIL from the stack's loop, and "this
process" CPU figures are the stack's alone. `--client thread` runs it on a loop
in this process (how this bench measured before: the client's CPU, the same for
both calls, is then in both rates and pulls the ratio down).

Jobs go to a share whose instance type no host has, so the figures are admission's
(durable append, group commit) and not scheduling's. Submits ask for `x-qm-seq` in
the trailing metadata, as the Python client does (`--seq-in initial`: in the initial
metadata, as clients that do not ask get it). Asserts nothing.

    python bench/submit_bench.py [--rounds 3] [--calls 1000] [--insecure] [--parts all,admission]
        [--seq-in trailer|initial]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import nats
from grpc_health.v1 import health_pb2, health_pb2_grpc
from loop_callbacks import LoopCallbacks

from qm_admission.group_commit import SubmitGroups
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


async def rate(
    calls: int,
    in_flight: int,
    one: Callable[[int], Awaitable[object]],
    latencies: list[float] | None = None,
) -> float:
    """Calls per second with `in_flight` callers sharing `calls` calls (each call's
    seconds appended to `latencies` when given)."""
    counter = iter(range(calls))

    async def caller() -> None:
        for i in counter:
            started = time.perf_counter()
            await one(i)
            if latencies is not None:
                latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(in_flight)))
    return calls / (time.perf_counter() - began)


class CpuMeter:
    """CPU seconds used since `start()` by this process (client and stack) and by the
    stack's servers (nats-server, Postgres and its backends: every process whose command
    line names the stack's data dir, and their children); read from /proc. On a loaded
    machine a steadier figure than rates."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = str(data_dir)
        self._tick = os.sysconf("SC_CLK_TCK")
        self._began = (0.0, 0.0)

    def _now(self) -> tuple[float, float]:
        parents: dict[int, int] = {}
        seconds: dict[int, float] = {}
        roots: set[int] = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                pid = int(entry.name)
                parents[pid] = int(fields[1])
                seconds[pid] = (int(fields[11]) + int(fields[12])) / self._tick
                if self._data_dir in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    roots.add(pid)
        servers = 0.0
        for pid, spent in seconds.items():
            ancestor, hops = pid, 0
            while ancestor > 1 and ancestor not in roots and hops < 64:
                ancestor, hops = parents.get(ancestor, 0), hops + 1
            if ancestor in roots and pid != os.getpid():
                servers += spent
        return seconds.get(os.getpid(), 0.0), servers

    def start(self) -> None:
        self._began = self._now()

    def used(self) -> tuple[float, float]:
        own, servers = self._now()
        return own - self._began[0], servers - self._began[1]


class GroupCommitTimer:
    """Seconds each SubmitServiceJob spends in `SubmitGroups.submit`, while installed
    (the bench runs admission in this process, so it can time that one method)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._original = SubmitGroups.submit

    def __enter__(self) -> GroupCommitTimer:
        original, seconds = self._original, self.seconds

        async def timed(groups: SubmitGroups, requests: list[pb.SubmitServiceJobRequest]) -> Any:
            started = time.perf_counter()
            try:
                return await original(groups, requests)
            finally:
                seconds.append(time.perf_counter() - started)

        SubmitGroups.submit = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *_: object) -> None:
        SubmitGroups.submit = self._original  # type: ignore[method-assign]


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


def show(label: str, values: list[float], unit: str, form: str = ",.0f") -> None:
    print(
        f"{label:<52} min {min(values):>9{form}}  median {statistics.median(values):>9{form}}"
        f"  max {max(values):>9{form}} {unit}"
    )


def ratio(label: str, numerator: list[float], denominator: list[float]) -> None:
    values = [n / d for n, d in zip(numerator, denominator, strict=True)]
    print(
        f"{label:<52} min {min(values):>9.0%}  median {statistics.median(values):>9.0%}"
        f"  max {max(values):>9.0%}"
    )


Call = tuple[str, int, int, str]  # (kind: noop|submit|bulk, in flight, calls, name prefix)


class Caller:
    """Makes the timed calls on a channel of its own; returns (rate, each call's seconds)."""

    def __init__(self, address: str, credentials_dir: Path | None, insecure: bool, seq_in: str):
        self._metadata = (("x-qm-seq-in", seq_in),)
        self._channel = channel(address, credentials_dir, insecure)
        self._jobs = rpc.ServiceJobsStub(self._channel)  # type: ignore[no-untyped-call]
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def run(self, call: Call) -> tuple[float, list[float]]:
        kind, in_flight, calls, prefix = call
        check = health_pb2.HealthCheckRequest()
        latencies: list[float] = []
        if kind == "bulk":
            began = time.perf_counter()
            for b in range(calls):
                batch = [submit_request(f"{prefix}{b}-{i}") for i in range(1000)]
                await self._jobs.SubmitServiceJobs(
                    pb.SubmitServiceJobsRequest(jobs=batch), timeout=60, metadata=self._metadata
                )
            return calls * 1000 / (time.perf_counter() - began), latencies

        async def noop_call(_: int) -> object:
            return await self._health.Check(check, timeout=30)

        async def submit_call(i: int) -> object:
            return await self._jobs.SubmitServiceJob(
                submit_request(f"{prefix}{i}"), timeout=30, metadata=self._metadata
            )

        one = noop_call if kind == "noop" else submit_call
        return await rate(calls, in_flight, one, latencies), latencies

    async def close(self) -> None:
        await self._channel.close()


def _caller_process(
    address: str, credentials_dir: Path | None, insecure: bool, seq_in: str, pipe: Any
) -> None:
    """A client process: one Caller, calls run as the parent sends them (None: stop)."""

    async def serve() -> None:
        caller = Caller(address, credentials_dir, insecure, seq_in)
        await caller.run(("noop", 1, 10, ""))  # connected (TLS, token) before any timing
        pipe.send("ready")
        while (call := pipe.recv()) is not None:
            pipe.send(await caller.run(call))
        await caller.close()

    asyncio.run(serve())


class ClientProcess:
    """A `Caller` in a spawned process, driven over a pipe: its CPU is not this process's."""

    def __init__(self, address: str, credentials_dir: Path | None, insecure: bool, seq_in: str):
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(
            target=_caller_process, args=(address, credentials_dir, insecure, seq_in, child)
        )
        self._process.start()
        if self._pipe.recv() != "ready":
            raise RuntimeError("the client process did not start")

    async def run(self, call: Call) -> tuple[float, list[float]]:
        self._pipe.send(call)
        result: tuple[float, list[float]] = await asyncio.to_thread(self._pipe.recv)
        return result

    async def close(self) -> None:
        self._pipe.send(None)
        await asyncio.to_thread(self._process.join, 30)


async def measure(
    stack: StackThread,
    label: str,
    rounds: int,
    calls: int,
    insecure: bool,
    seq_in: str,
    client: str,
) -> dict[str, list[float]]:
    """Every figure of one set of parts, by name, one value per round."""
    caller: Caller | ClientProcess
    if client == "process":
        caller = await asyncio.to_thread(
            ClientProcess, stack.address, stack.credentials_dir, insecure, seq_in
        )
    else:
        caller = Caller(stack.address, stack.credentials_dir, insecure, seq_in)
    figures: dict[str, list[float]] = {}
    cpu = CpuMeter(stack.stack.data_dir)
    for r in range(rounds):
        for in_flight in (1, 64):
            prefix = f"{label}{r}-{in_flight}-"
            cpu.start()
            noop, noop_latency = await caller.run(("noop", in_flight, calls, ""))
            noop_cpu = cpu.used()
            cpu.start()
            with GroupCommitTimer() as grouped:
                submit, submit_latency = await caller.run(("submit", in_flight, calls, prefix))
            submit_cpu = cpu.used()
            figures.setdefault(f"noop {in_flight}", []).append(noop)
            figures.setdefault(f"submit {in_flight}", []).append(submit)
            for name, (own, children) in (("noop", noop_cpu), ("submit", submit_cpu)):
                figures.setdefault(f"{name} cpu {in_flight}", []).append(own / calls * 1e3)
                figures.setdefault(f"{name} cpu+ {in_flight}", []).append(
                    (own + children) / calls * 1e3
                )
            if in_flight == 1:
                for name, values in (
                    ("noop latency", noop_latency),
                    ("submit latency", submit_latency),
                    ("group commit latency", grouped.seconds),
                ):
                    figures.setdefault(name, []).append(statistics.median(values) * 1e3)
        bulk, _ = await caller.run(("bulk", 0, 5, f"{label}b{r}-"))
        figures.setdefault("bulk", []).append(bulk)
    # Loop callbacks per call: how many turns of the stack's loop a call takes, a
    # figure that the machine's load does not move (the timed rounds run uncounted).
    for in_flight in (1, 64):
        for kind in ("noop", "submit"):
            with LoopCallbacks(stack) as counted:
                await caller.run((kind, in_flight, calls, f"{label}h-{in_flight}-"))
            figures[f"{kind} handles {in_flight}"] = [counted.count / calls]
    await caller.close()
    return figures


def report(label: str, figures: dict[str, list[float]], raw: list[float], size: int) -> None:
    print(f"-- parts: {label}")
    for in_flight in (1, 64):
        show(f"no-op unary call, {in_flight} in flight", figures[f"noop {in_flight}"], "calls/s")
        show(f"SubmitServiceJob, {in_flight} in flight", figures[f"submit {in_flight}"], "jobs/s")
        ratio(
            f"  SubmitServiceJob / no-op, {in_flight} in flight",
            figures[f"submit {in_flight}"],
            figures[f"noop {in_flight}"],
        )
    for in_flight in (1, 64):
        for name in ("noop", "submit"):
            what = "no-op call" if name == "noop" else "SubmitServiceJob"
            show(
                f"CPU per {what}, {in_flight} in flight (this process)",
                figures[f"{name} cpu {in_flight}"],
                "ms",
                ".2f",
            )
            show(
                "  with nats-server and Postgres",
                figures[f"{name} cpu+ {in_flight}"],
                "ms",
                ".2f",
            )
        # Rates are the inverse of CPU per call where CPU is what runs out.
        ratio(
            f"  CPU no-op / CPU submit, {in_flight} in flight (this process)",
            figures[f"noop cpu {in_flight}"],
            figures[f"submit cpu {in_flight}"],
        )
    show("lone no-op call latency, p50", figures["noop latency"], "ms", ".2f")
    show("lone SubmitServiceJob latency, p50", figures["submit latency"], "ms", ".2f")
    show("  of it in group commit (append, ack), p50", figures["group commit latency"], "ms", ".2f")
    for in_flight in (1, 64):
        show(
            f"stack loop callbacks per call, {in_flight} in flight: no-op",
            figures[f"noop handles {in_flight}"],
            "",
            ".1f",
        )
        show("  SubmitServiceJob", figures[f"submit handles {in_flight}"], "", ".1f")
    show("SubmitServiceJobs, 1000 per call", figures["bulk"], "jobs/s")
    show(f"raw publish_async, {size}-byte messages", raw, "msg/s")
    ratio("  SubmitServiceJobs / raw publish_async", figures["bulk"], raw)


async def raw_rates(rounds: int) -> tuple[list[float], int]:
    """The baseline: a plaintext nats-server of its own (no TLS, no users), one message
    of a submitted job's size per job; stricter than the stack's secured bus."""
    with tempfile.TemporaryDirectory() as store, EmbeddedNats(store) as server:
        size = len(encode_batch([_a_submitted_event()]))
        return [await raw_publish_rate(server.url, 5000, size) for _ in range(rounds)], size


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
    parser.add_argument(
        "--parts", default="all,admission", help="comma-separated: all (qm up), admission"
    )
    parser.add_argument(
        "--client",
        choices=("process", "thread"),
        default="process",
        help="the timed client in a process of its own, or on a loop in the stack's process",
    )
    parser.add_argument(
        "--seq-in",
        choices=("trailer", "initial"),
        default="trailer",
        help="where submits ask for x-qm-seq (the Python client asks for the trailer)",
    )
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {}
    for parts in args.parts.split(","):
        if parts not in ("all", "admission"):
            parser.error(f"--parts: unknown set {parts!r}")
        results[parts] = run_stack(
            parts, args.rounds, args.calls, args.insecure, args.seq_in, args.client
        )
    raw, size = asyncio.run(raw_rates(args.rounds))
    print("secured stack (TLS, bearer tokens)" if not args.insecure else "insecure stack")
    print(f"x-qm-seq in the {args.seq_in} metadata of submits; client in a {args.client}")
    for parts, figures in results.items():
        report(parts, figures, raw, size)


def run_stack(
    parts: str, rounds: int, calls: int, insecure: bool, seq_in: str, client: str
) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = StackSettings(data_dir=Path(tmp), nodes=0, grpc_port=0, secure=not insecure)
        with StackThread(settings) as stack:
            c = Quartermaster(
                stack.address, credentials_dir=stack.credentials_dir, insecure=insecure
            )
            c.create_service_environment("env-bulk", {UNIT: 1})
            c.create_scheduling_policy("fifo")
            c.create_job_queue("bulk", "env-bulk", "fifo")
            c.create_quota_share("bulk", "BULK", {UNIT: 1}, "LEND")
            if parts == "admission":
                stack.stop_part("scheduler")
                stack.stop_part("warmpool")
            return asyncio.run(measure(stack, parts, rounds, calls, insecure, seq_in, client))


if __name__ == "__main__":
    main()
