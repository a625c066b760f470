"""Append and read rates of the JetStream event log on this machine (a few seconds).

    python bench/bus_bench.py [--payload 200] [--batch 50000]

Starts its own nats-server in a temp dir. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time

from quartermaster.bus import JetStreamLog
from quartermaster.embedded import EmbeddedNats


def show(label: str, rate: float) -> None:
    print(f"{label + ':':<48}{rate:>10,.0f} msg/s")


async def bench(payload_size: int, batch_size: int, single_s: float) -> None:
    payload = b"x" * payload_size
    with tempfile.TemporaryDirectory(prefix="qm-bus-bench-") as store:
        async with EmbeddedNats(store) as server:
            print(f"nats-server start: {server.start_seconds:.3f}s  ({os.cpu_count()} cpus)")
            log = await JetStreamLog.connect(server.url, stream="BENCH", subjects_prefix="bench")
            try:
                count, began = 0, time.perf_counter()
                while time.perf_counter() - began < single_s:
                    await log.append("bench.single", payload, msg_id=f"s{count}")
                    count += 1
                rate = count / (time.perf_counter() - began)
                show(f"append, awaited one at a time ({payload_size} B)", rate)

                plain = [("bench.plain", payload, None) for _ in range(batch_size)]
                began = time.perf_counter()
                await log.append_batch(plain)
                rate = batch_size / (time.perf_counter() - began)
                show(f"append_batch of {batch_size:,}, no msg ids", rate)

                items = [("bench.batch", payload, f"b{i}") for i in range(batch_size)]
                began = time.perf_counter()
                await log.append_batch(items)
                rate = batch_size / (time.perf_counter() - began)
                show(f"append_batch of {batch_size:,}, msg ids", rate)

                fenced = [("bench.fenced", payload, f"f{i}") for i in range(batch_size)]
                began = time.perf_counter()
                await log.append_batch(fenced, expected_last_seq=await log.last_seq())
                rate = batch_size / (time.perf_counter() - began)
                show("append_batch, fenced (needs msg ids)", rate)

                last = await log.last_seq()
                began, read = time.perf_counter(), 0
                async with contextlib.aclosing(log.read(1, last)) as entries:
                    async for _ in entries:
                        read += 1
                rate = read / (time.perf_counter() - began)
                show(f"read {read:,} from seq 1 (ordered reader)", rate)
            finally:
                await log.delete_stream()
                await log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payload", type=int, default=200, help="bytes per message")
    parser.add_argument("--batch", type=int, default=20_000, help="messages per batch")
    parser.add_argument("--single-seconds", type=float, default=1.0)
    args = parser.parse_args()
    asyncio.run(bench(args.payload, args.batch, args.single_seconds))


if __name__ == "__main__":
    main()
