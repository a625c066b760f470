"""`qm up` and `qm demo`: run the stack in this process until Ctrl-C (or the demo ends)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path

from quartermaster.stack.settings import StackSettings
from quartermaster.stack.stack import Stack


def settings_from(args: argparse.Namespace, **overrides: object) -> StackSettings:
    fields: dict[str, object] = {
        "data_dir": Path(args.data_dir),
        "nodes": args.nodes,
        "instance_type": args.instance_type,
        "runtime": args.runtime,
        "grpc_port": args.grpc_port,
        "nats_url": args.nats_url,
        "postgres_url": args.postgres_url,
        "gpus_per_node": args.gpus_per_node,
    }
    fields.update(overrides)
    return StackSettings(**fields)  # type: ignore[arg-type]


async def up(settings: StackSettings) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    async with Stack(settings) as stack:
        print(
            f"Quartermaster is up: gRPC {stack.address}  (nats {stack.nats_url}; "
            f"{settings.nodes} x {settings.instance_type} hosts; data in {stack.data_dir})",
            flush=True,
        )
        print(f"try: qm --address {stack.address} nodes list   (Ctrl-C stops)", flush=True)
        await stopping.wait()
    print("Quartermaster stopped; `qm up` on the same --data-dir resumes.", flush=True)


async def demo(settings: StackSettings) -> None:
    from quartermaster.stack.demo import play

    async with Stack(settings) as stack:
        print(f"Quartermaster is up: gRPC {stack.address}", flush=True)
        await asyncio.to_thread(play, stack.address, settings.instance_type)


def run_stack_command(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    if args.group == "up":
        asyncio.run(up(settings_from(args)))
        return 0
    # The demo needs 3 hosts and short grace periods so preemptions show quickly.
    data_dir = Path(args.data_dir) / "demo"
    with contextlib.suppress(FileNotFoundError):
        import shutil

        shutil.rmtree(data_dir)
    settings = settings_from(args, data_dir=data_dir, nodes=3, stop_grace_seconds=3.0)
    asyncio.run(demo(settings))
    return 0
