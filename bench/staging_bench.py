"""Channel staging and checkpoint restore against the raw S3 read rate of the same store.

Starts the embedded SeaweedFS (as `qm up` does) in a temporary folder, loads two
data sets, and in each run measures (staged and restored in alternating order):

- raw: every object read with the same client and parallelism, bytes thrown away
  (no file written): the store's read rate, the baseline, measured again right before
  each of the two below (their ratios are to that read);
- staged: the node agent's `contract.stage.prepare` of a channel naming them, into
  a fresh /opt/ml tree (files written), as before a job's entrypoint starts;
- restored: the same objects as a CheckpointConfig restore.

Data sets: 1 GiB in 1,000 objects of 1 MiB, and one 2 GiB object (`--scale` shrinks
both for a quick look). Prints min/median/max MiB/s of each and the ratios to raw.
Asserts nothing.

    python bench/staging_bench.py [--runs 3] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import obstore

from qm_node_agent.contract import build_contract
from qm_node_agent.contract.checkpoints import checkpoints_of, restore
from qm_node_agent.contract.stage import prepare
from quartermaster.embedded.seaweedfs import EmbeddedSeaweedFS
from quartermaster.objectstore import S3Access, parse_s3_uri
from quartermaster.objectstore.store import PARALLEL, RANGE_BYTES, ObjectStore
from quartermaster.testing.builders import dispatched_job

MIB = 1024 * 1024
BUCKET = "bench"


def load(store: ObjectStore, scale: float, scratch: Path) -> dict[str, int]:
    """The two data sets; their sizes in bytes."""
    store.create_bucket(BUCKET)
    count, size = max(1, int(1000 * scale)), MIB
    block = os.urandom(size)
    with cf.ThreadPoolExecutor(PARALLEL) as pool:
        list(
            pool.map(
                lambda i: store.put_bytes(parse_s3_uri(f"s3://{BUCKET}/many/{i:05d}"), block),
                range(count),
            )
        )
    big = scratch / "big.bin"
    big_size = max(RANGE_BYTES * 2, int(2048 * MIB * scale))
    with open(big, "wb") as handle:
        chunk = os.urandom(64 * MIB)
        left = big_size
        while left > 0:
            handle.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
    store.upload(big, parse_s3_uri(f"s3://{BUCKET}/one/big.bin"))
    big.unlink()
    return {"many": count * size, "one": big_size}


def raw_read(store: ObjectStore, prefix: str) -> int:
    """Every object under the prefix read and dropped, as parallel as staging reads."""
    where = parse_s3_uri(f"s3://{BUCKET}/{prefix}/")
    infos = store.list_objects(where)
    s3 = store._store(BUCKET)  # the same client staging uses

    def whole(key: str) -> int:
        return len(obstore.get(s3, key).bytes())

    def part(key: str, start: int, end: int) -> int:
        return len(obstore.get_range(s3, key, start=start, end=end))

    with cf.ThreadPoolExecutor(PARALLEL) as pool:
        jobs = []
        for info in infos:
            if info.size > RANGE_BYTES * 2:
                for start in range(0, info.size, RANGE_BYTES):
                    end = min(info.size, start + RANGE_BYTES)
                    jobs.append(pool.submit(part, info.key, start, end))
            else:
                jobs.append(pool.submit(whole, info.key))
        return sum(job.result() for job in jobs)


def job_payload(prefix: str) -> dict[str, object]:
    return {
        "RoleArn": "r",
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "DataSource": {"S3DataSource": {"S3Uri": f"s3://{BUCKET}/{prefix}/"}},
            }
        ],
        "CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/{prefix}/"},
    }


def staged(access: S3Access, prefix: str, root: Path) -> int:
    payload = job_payload(prefix)
    payload.pop("CheckpointConfig")
    contract = build_contract(
        _job(payload),
        payload,
        host="h1",
        instance_type="ml.g5.xlarge",
        ml_dir=str(root / "ml"),
        hosts_file=str(root / "hosts"),
    )
    return prepare(contract, access, addresses={}, network_interface="lo").bytes


def restored(access: S3Access, prefix: str, root: Path) -> int:
    checkpoints = checkpoints_of(job_payload(prefix), str(root / "ml"))
    assert checkpoints is not None
    return restore(checkpoints, access)


def _job(payload: dict[str, object]):  # type: ignore[no-untyped-def]
    return dispatched_job(payload, job_id="bench")


def rate(size: int, seconds: float) -> float:
    return size / MIB / seconds


def line(name: str, rates: list[float], base: list[float] | None) -> str:
    text = (
        f"  {name:<10} MiB/s min {min(rates):7.1f}  median {statistics.median(rates):7.1f}"
        f"  max {max(rates):7.1f}"
    )
    if base is not None:
        ratios = [r / b for r, b in zip(rates, base, strict=True)]
        text += (
            f"   to the raw read just before: min {min(ratios):.2f}"
            f"  median {statistics.median(ratios):.2f}  max {max(ratios):.2f}"
        )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 1 GiB / 2 GiB")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="qm-staging-bench-") as tmp:
        root = Path(tmp)
        weed = EmbeddedSeaweedFS(root / "s3", root / "credentials").start()
        try:
            access = weed.access
            store = ObjectStore(access)
            sizes = load(store, args.scale, root)
            print(
                f"store: SeaweedFS on loopback; data: {sizes['many'] // MIB} MiB in "
                f"{sizes['many'] // MIB} objects, one object of {sizes['one'] // MIB} MiB; "
                f"{args.runs} runs, {PARALLEL} requests in flight"
            )
            for prefix, label in (("many", "1,000 objects"), ("one", "one object")):
                figures: dict[str, list[float]] = {
                    "raw": [],
                    "staged": [],
                    "restored": [],
                    "raw before staged": [],
                    "raw before restored": [],
                }
                for run in range(args.runs):
                    # Each is measured right after a raw read of its own (its baseline),
                    # in alternating order: the first write after a read ran slower.
                    for kind in ("staged", "restored") if run % 2 else ("restored", "staged"):
                        for step in ("raw", kind):
                            target = root / f"run-{run}-{kind}-{step}"
                            target.mkdir()
                            began = time.perf_counter()
                            if step == "raw":
                                moved = raw_read(store, prefix)
                            elif step == "staged":
                                moved = staged(access, prefix, target)
                            else:
                                moved = restored(access, prefix, target)
                            seconds = time.perf_counter() - began
                            assert moved == sizes[prefix], (step, moved, sizes[prefix])
                            figures[step].append(rate(moved, seconds))
                            if step == "raw":
                                figures[f"raw before {kind}"].append(figures["raw"][-1])
                            shutil.rmtree(target)
                print(f"{label} ({sizes[prefix] // MIB} MiB):")
                print(line("raw read", figures["raw"], None))
                print(line("staged", figures["staged"], figures["raw before staged"]))
                print(line("restored", figures["restored"], figures["raw before restored"]))
        finally:
            weed.stop()


if __name__ == "__main__":
    main()
