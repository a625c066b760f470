"""Before the entrypoint starts: the /opt/ml tree, its config files, /etc/hosts, channels.

The tree is a host folder per warm pool chain (`Layout.ml_dir`), which each runtime
shows the job as /opt/ml. Every attempt starts with fresh config, model and output
folders; the staged channels stay with the chain, so a warm pool that reuses the
host downloads only what changed (each staged object's ETag is kept in
`staged.json` beside the tree, written once a channel is complete).

Errors: a channel the job's role cannot read (no bucket, no object, access denied)
is the client's (`LaunchError.client`, naming the channel and URI), a store that
does not answer the host's (`LaunchError.infrastructure`: retried, not counted
against the job's attempts).
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from qm_node_agent.contract.checkpoints import restore
from qm_node_agent.contract.host import needs_lookup, resolve
from qm_node_agent.contract.spec import Channel, Contract
from qm_node_agent.errors import LaunchError
from qm_node_agent.spares import empty_folder
from quartermaster.events import FailureClass
from quartermaster.files import write_whole
from quartermaster.objectstore import (
    S3Access,
    S3Location,
    StoreClientError,
    StoreUnavailable,
    parse_s3_uri,
)
from quartermaster.objectstore.store import ObjectInfo, ObjectStore

_T = TypeVar("_T")
SKELETON = ("input/config", "input/data", "model", "output/data", "code", "checkpoints")
CONFIG_FILES = ("hyperparameters.json", "inputdataconfig.json", "resourceconfig.json")
MANIFEST = "staged.json"
MOUNTS = "mounts.fstab"  # the process runtime's bind mounts for the chain's jobs


def _empty_fresh(ml: Path) -> None:
    """What an attempt starts without: config files (rewritten), model, output, code.
    Emptied, not removed and made again: no inode freed or made on a reused tree."""
    empty_folder(ml / "input" / "config", keep=CONFIG_FILES)
    empty_folder(ml / "model")
    empty_folder(ml / "output", keep=("data",))
    empty_folder(ml / "output" / "data")
    empty_folder(ml / "code")


def reset_chain_tree(chain_dir: Path) -> None:
    """Make a warm pool chain's folder (`Layout.ml_root/<chain>`) ready for another
    chain: what jobs wrote goes (channels, model, output, code, checkpoints, the
    staging record); the skeleton (made again where a job removed part of it), the
    config files, the hosts file and the mounts file stay, to be rewritten in place by
    the next `prepare` (see `Spares.give_tree`), which has nothing to empty then."""
    ml = chain_dir / "ml"
    _empty_fresh(ml)
    empty_folder(ml / "input" / "data")
    empty_folder(ml / "checkpoints")
    empty_folder(ml / "input", keep=("config", "data"))
    empty_folder(ml, keep=("input", "model", "output", "code", "checkpoints"))
    empty_folder(chain_dir, keep=("ml", "hosts", MOUNTS))
    for sub in SKELETON:
        (ml / sub).mkdir(parents=True, exist_ok=True)


class Staged(msgspec.Struct, frozen=True):
    bytes: int  # downloaded or copied now
    seconds: float
    channels: int  # channels (re)staged now; 0: all were there already
    restored: int = 0  # checkpoint bytes restored


class _ChannelRecord(msgspec.Struct):
    source: str
    shard: str  # "i/N" for ShardedByS3Key, "" otherwise
    files: dict[str, str]  # relative path -> ETag ("" for a local copy)


def prepare(
    contract: Contract,
    access: S3Access | None,
    *,
    addresses: dict[str, str],
    network_interface: str,
    fresh: bool = False,
) -> Staged:
    """Make the tree for this attempt (runs in a worker thread, or see `only_rewrites`).

    `fresh`: the tree was just reset (`reset_chain_tree`): nothing to empty, its
    skeleton whole (five folder scans and six `mkdir`s fewer on the agent's loop)."""
    ml = Path(contract.outputs.ml_dir)
    if not fresh:
        _empty_fresh(ml)
        for sub in SKELETON:
            (ml / sub).mkdir(parents=True, exist_ok=True)
    config = ml / "input" / "config"
    _write_json(config / "hyperparameters.json", contract.hyperparameters)
    _write_json(config / "inputdataconfig.json", contract.input_data_config())
    _write_json(config / "resourceconfig.json", contract.resource_config(network_interface))
    _write_hosts(Path(contract.hosts_file), contract, addresses)
    staged = _stage_channels(ml, contract, access)
    checkpoints = contract.outputs.checkpoints
    if checkpoints is None:
        return staged
    started = time.perf_counter()
    restored = _retried(functools.partial(restore, checkpoints, access))
    return Staged(
        staged.bytes + restored,
        staged.seconds + time.perf_counter() - started,
        staged.channels,
        restored,
    )


def only_rewrites(contract: Contract, addresses: dict[str, str]) -> bool:
    """Whether `prepare`, on a tree with nothing a job wrote in it (a kept one, reset
    when it was given back: `Spares.take_tree`), only rewrites its few small files in
    place: no channel to stage, no checkpoint to restore, no address to look up. Such a
    prepare may run on the caller's loop: it takes less there than a worker thread's
    hand-off and return (0.63 + 0.30 ms p50 on an idle agent of a 2-core VM)."""
    return (
        not contract.channels
        and contract.outputs.checkpoints is None
        and not any(map(needs_lookup, addresses.values()))
    )


def _write_json(path: Path, value: Any) -> None:
    write_if_changed(path, msgspec.json.encode(value))


def write_if_changed(path: Path, data: bytes) -> None:
    """In place, and not at all when the file (a reused tree's) already holds `data`.

    Overwritten from the start and cut to length, never emptied first: ext4 flushes a
    file that was truncated to empty when it is closed (`auto_da_alloc`), which made
    a changed small file cost 0.25 ms (p50) on this host's loop, against 0.023 ms."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        if os.pread(fd, len(data) + 1, 0) == data:
            return
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def _write_hosts(path: Path, contract: Contract, addresses: dict[str, str]) -> None:
    """The host's own /etc/hosts, then each `algo-i` at its gang host's address."""
    try:
        base = Path("/etc/hosts").read_text(encoding="utf-8")
    except OSError:
        base = "127.0.0.1\tlocalhost\n"
    lines = [base.rstrip("\n"), "# the training job's hosts (qm-node-agent)"]
    for algo, host_id in zip(contract.hosts, contract.host_ids, strict=True):
        lines.append(f"{resolve(addresses.get(host_id, ''))}\t{algo}")
    # In place, not renamed over: a docker sandbox made before this attempt has the
    # file's inode mounted.
    write_if_changed(path, ("\n".join(lines) + "\n").encode())


def _stage_channels(ml: Path, contract: Contract, access: S3Access | None) -> Staged:
    started = time.perf_counter()
    manifest_path = ml.parent / MANIFEST
    records = _read_manifest(manifest_path)
    wanted = {channel.name for channel in contract.channels}
    data = ml / "input" / "data"
    for stale in [name for name in records if name not in wanted]:  # channels gone
        del records[stale]
        shutil.rmtree(data / stale, ignore_errors=True)
    for entry in os.listdir(data):
        if entry not in wanted:
            shutil.rmtree(data / entry, ignore_errors=True)
    store = None
    total = staged = 0
    for channel in contract.channels:
        target = data / channel.name
        shard = _shard(channel, contract)
        previous = records.pop(channel.name, None)
        _write_manifest(manifest_path, records)  # a crash half way stages it again
        if channel.from_s3:
            if access is None:
                raise LaunchError.client(
                    f"InputDataConfig channel {channel.name!r}: {channel.source}: the job's "
                    f"RoleArn {contract.outputs.role_arn!r} maps to no object-store credentials"
                )
            if store is None:
                store = ObjectStore(access)
            record, moved = _retried(
                functools.partial(_stage_s3, store, channel, shard, target, previous)
            )
        else:
            record, moved = _stage_local(channel, target, previous)
        records[channel.name] = record
        _write_manifest(manifest_path, records)
        total += moved
        staged += moved > 0 or previous is None or previous.source != record.source
    return Staged(total, time.perf_counter() - started, staged)


# A store that does not answer is tried again after these pauses (on top of the
# adapter's own retries) before the attempt fails as the host's fault: a store down
# for a while does not turn into a storm of attempts.
UNAVAILABLE_PAUSES_S = (1.0, 4.0, 10.0)


def _retried(stage: Callable[[], _T]) -> _T:
    for pause in UNAVAILABLE_PAUSES_S:
        try:
            return stage()
        except LaunchError as err:
            if err.failure_class is not FailureClass.INFRASTRUCTURE_ERROR:
                raise
            time.sleep(pause)
    return stage()


def _shard(channel: Channel, contract: Contract) -> str:
    if channel.distribution != "ShardedByS3Key" or len(contract.hosts) == 1:
        return ""
    index = contract.hosts.index(contract.current_host)
    return f"{index}/{len(contract.hosts)}"


def _stage_s3(
    store: ObjectStore,
    channel: Channel,
    shard: str,
    target: Path,
    previous: _ChannelRecord | None,
) -> tuple[_ChannelRecord, int]:
    location = parse_s3_uri(channel.source)
    try:
        objects = _objects(store, channel, location)
        if shard:
            index, count = (int(part) for part in shard.split("/"))
            objects = objects[index::count]
        same = previous is not None and previous.source == channel.source
        have = previous.files if same and previous is not None and previous.shard == shard else {}
        if not same:
            shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True, exist_ok=True)
        wanted = {relative: info for relative, info in objects}
        for relative in set(have) - set(wanted):
            (target / relative).unlink(missing_ok=True)
        todo: list[tuple[S3Location, Path, int | None]] = []
        for relative, (where, info) in wanted.items():
            path = target / relative
            if have.get(relative) == info.etag and info.etag and path.is_file():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            todo.append((where, path, info.size))
        moved = store.download_many(todo)
    except StoreClientError as err:
        raise LaunchError.client(
            f"InputDataConfig channel {channel.name!r}: {channel.source}: {_why(err)}"
        ) from err
    except StoreUnavailable as err:
        raise LaunchError.infrastructure(
            f"object store unavailable staging channel {channel.name!r} from "
            f"{channel.source}: {err}"
        ) from err
    files = {relative: info.etag for relative, (_where, info) in wanted.items()}
    return _ChannelRecord(channel.source, shard, files), moved


def _objects(
    store: ObjectStore, channel: Channel, location: S3Location
) -> list[tuple[str, tuple[S3Location, ObjectInfo]]]:
    """(relative path, (object, info)) of each object the channel names, in key order."""
    found: list[tuple[str, tuple[S3Location, ObjectInfo]]] = []
    if channel.data_type == "ManifestFile":
        for where, relative in _manifest_entries(store, location, channel):
            info = store.head(where)
            found.append((_safe(relative, channel), (where, info)))
        return found
    listing = [info for info in store.list_objects(location) if not info.key.endswith("/")]
    if not listing:
        raise StoreClientError(f"{location.uri}: no objects under this prefix")
    for info in listing:
        relative = info.key[len(location.key) :].lstrip("/")
        if not relative:  # the prefix names one object
            relative = posixpath.basename(info.key)
        where = S3Location(location.bucket, info.key)
        found.append((_safe(relative, channel), (where, info)))
    return found


def _manifest_entries(
    store: ObjectStore, location: S3Location, channel: Channel
) -> list[tuple[S3Location, str]]:
    """A manifest file: `[{"prefix": "s3://b/p/"}, "rel/a", "rel/b", ...]`."""
    try:
        body = json.loads(store.get_bytes(location))
        prefix = parse_s3_uri(body[0]["prefix"])
        relatives = [str(item) for item in body[1:]]
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise LaunchError.client(
            f"InputDataConfig channel {channel.name!r}: {channel.source} is not a manifest "
            f'file ([{{"prefix": "s3://..."}}, "key", ...]): {err}'
        ) from err
    base = prefix.key
    return [(S3Location(prefix.bucket, base + relative), relative) for relative in relatives]


def _safe(relative: str, channel: Channel) -> str:
    clean = posixpath.normpath(relative)
    if clean.startswith(("../", "/")) or clean in ("..", "."):
        raise LaunchError.client(
            f"InputDataConfig channel {channel.name!r}: object {relative!r} would land "
            "outside the channel's folder"
        )
    return clean


def _stage_local(
    channel: Channel, target: Path, previous: _ChannelRecord | None
) -> tuple[_ChannelRecord, int]:
    record = _ChannelRecord(channel.source, "", {})
    if previous is not None and previous.source == channel.source and target.exists():
        return record, 0
    if not os.path.exists(channel.source):
        raise LaunchError.client(
            f"InputDataConfig channel {channel.name!r}: {channel.source} does not exist"
        )
    shutil.rmtree(target, ignore_errors=True)
    if os.path.isdir(channel.source):
        shutil.copytree(channel.source, target, symlinks=True)
    else:
        target.mkdir(parents=True)
        shutil.copy2(channel.source, target)
    moved = sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
    return record, moved


def _why(err: Exception) -> str:
    text = str(err)
    return text.split(": ", 1)[1] if ": " in text else text


def _read_manifest(path: Path) -> dict[str, _ChannelRecord]:
    try:
        return msgspec.json.decode(path.read_bytes(), type=dict[str, _ChannelRecord])
    except (OSError, msgspec.DecodeError):
        return {}


def _write_manifest(path: Path, records: dict[str, _ChannelRecord]) -> None:
    write_whole(path, msgspec.json.encode(records), mode=0o644)
