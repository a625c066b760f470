"""`qm up` and `qm demo`: run the stack in this process until Ctrl-C (or the demo ends)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quartermaster_stack.settings import StackSettings
from quartermaster_stack.stack import Stack


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
    from quartermaster_stack.demo import play

    async with Stack(settings) as stack:
        print(f"Quartermaster is up: gRPC {stack.address}", flush=True)
        await asyncio.to_thread(play, stack.address, settings.instance_type)


def _up(args: argparse.Namespace) -> int:
    asyncio.run(up(settings_from(args)))
    return 0


def _demo(args: argparse.Namespace) -> int:
    # The demo needs 3 hosts and short grace periods so preemptions show quickly.
    data_dir = Path(args.data_dir) / "demo"
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(data_dir)
    settings = settings_from(args, data_dir=data_dir, nodes=3, stop_grace_seconds=3.0)
    asyncio.run(demo(settings))
    return 0


def _logging(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def wrapped(args: argparse.Namespace) -> int:
        logging.basicConfig(
            level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
        )
        return run(args)

    return wrapped


def _stack_flags(p: argparse.ArgumentParser) -> None:
    d = StackSettings()
    p.add_argument("--nodes", type=int, default=d.nodes, help="node agents (emulated GPU hosts)")
    p.add_argument("--instance-type", default=d.instance_type, help="instance type of every host")
    p.add_argument(
        "--runtime", choices=("process", "docker"), default=d.runtime, help="how jobs run"
    )
    p.add_argument("--grpc-port", type=int, default=d.grpc_port, help="admission gRPC port")
    p.add_argument("--data-dir", default=str(d.data_dir), help="log, projection and credentials")
    p.add_argument("--nats-url", default=None, help="use this NATS server instead of embedding one")
    p.add_argument(
        "--postgres-url", default=None, help="use this Postgres instead of embedding one"
    )
    p.add_argument("--gpus-per-node", type=int, default=None, help="default: detect (nvidia-smi)")


def register(groups: Any) -> None:
    """Entry point (`quartermaster.cli`): adds `qm up` and `qm demo` to the library's `qm`."""
    formatter = argparse.ArgumentDefaultsHelpFormatter
    up_ = groups.add_parser(
        "up", help="run the whole stack on this machine", formatter_class=formatter
    )
    _stack_flags(up_)
    up_.set_defaults(run=_logging(_up))
    demo_ = groups.add_parser(
        "demo", help="bring the stack up and play the seed scenario", formatter_class=formatter
    )
    _stack_flags(demo_)
    demo_.set_defaults(run=_logging(_demo))
