"""GPU discovery with `nvidia-smi`: the CSV query, with `nvidia-smi -L` as a fallback."""

from __future__ import annotations

import asyncio
import csv
import logging
import re
import shutil

import msgspec

log = logging.getLogger(__name__)

QUERY_ARGS = ("--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader")
LIST_ARGS = ("-L",)
_LIST_LINE = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)\s*$")
_MIB = re.compile(r"^(?P<n>\d+)\s*MiB$")


class Gpu(msgspec.Struct, frozen=True):
    index: int
    name: str
    uuid: str
    memory_mib: int | None = None


def parse_query_csv(text: str) -> list[Gpu]:
    """Parse `nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader`."""
    gpus = []
    for row in csv.reader(text.splitlines(), skipinitialspace=True):
        if not row or not row[0].strip():
            continue
        if len(row) < 3 or not row[0].strip().isdigit():
            raise ValueError(f"unexpected nvidia-smi query line: {', '.join(row)!r}")
        memory = None
        if len(row) > 3 and (match := _MIB.match(row[3].strip())):
            memory = int(match["n"])
        gpus.append(Gpu(int(row[0]), row[1].strip(), row[2].strip(), memory))
    return sorted(gpus, key=lambda gpu: gpu.index)


def parse_list(text: str) -> list[Gpu]:
    """Parse `nvidia-smi -L`; MIG device lines under a GPU are not GPUs of their own."""
    gpus = []
    for line in text.splitlines():
        match = _LIST_LINE.match(line)
        if match:
            gpus.append(Gpu(int(match["index"]), match["name"], match["uuid"]))
    return sorted(gpus, key=lambda gpu: gpu.index)


async def detect_gpus(binary: str = "nvidia-smi", timeout_s: float = 15.0) -> list[Gpu]:
    """The host's GPUs; [] when nvidia-smi is absent or cannot talk to a driver."""
    path = shutil.which(binary)
    if path is None:
        log.info("no %s on PATH: no GPUs detected", binary)
        return []
    for args, parse in ((QUERY_ARGS, parse_query_csv), (LIST_ARGS, parse_list)):
        output = await _run(path, args, timeout_s)
        if output is None:
            continue
        try:
            return parse(output)
        except ValueError:
            log.warning("could not parse `%s %s` output", binary, " ".join(args), exc_info=True)
    log.warning("%s is present but reported no GPUs", binary)
    return []


async def _run(path: str, args: tuple[str, ...], timeout_s: float) -> str | None:
    try:
        proc = await asyncio.create_subprocess_exec(
            path,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as err:
        log.warning("cannot run %s: %s", path, err)
        return None
    try:
        out, err_out = await asyncio.wait_for(proc.communicate(), timeout_s)
    except BaseException as err:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if not isinstance(err, TimeoutError):
            raise
        log.warning("%s %s timed out after %ss", path, " ".join(args), timeout_s)
        return None
    if proc.returncode != 0:
        log.warning(
            "%s %s exited %s: %s",
            path,
            " ".join(args),
            proc.returncode,
            err_out.decode(errors="replace").strip() or out.decode(errors="replace").strip(),
        )
        return None
    return out.decode(errors="replace")
