"""What `qm simulate` reads: a candidate configuration and a trace of jobs.

A configuration (JSON; YAML when PyYAML is installed) names the capacity per unit
and the quota shares with the API's names::

    {"capacity": {"ml.g5.xlarge": 8},
     "shares": [{"name": "QS1", "limits": {"ml.g5.xlarge": 4},
                 "strategy": "LEND_AND_BORROW", "borrowLimit": 100,
                 "inSharePreemption": "ENABLED",
                 "checkpointIntervalSeconds": 600}, ...],
     "stopSeconds": 0}

`checkpointIntervalSeconds` (optional): the share's jobs checkpoint that often while
they run, so a preempted attempt loses only the work since its last checkpoint and
its next attempt resumes from there (`qm simulate --checkpoint-interval` sets it too).

A trace is JSON lines, one job each: `arrival` and `duration` in seconds, `share`,
and optionally `priority`, `instanceCount`, `instanceType` (default: the only
unit of the capacity) and `name`. A bad field is named in the error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from quartermaster.audit.errors import ConfigError
from quartermaster.events import SharingStrategy
from quartermaster.events import State as Toggle

MAX_SHARES = 20


class ShareConfig(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    name: str
    limits: dict[str, int]
    strategy: SharingStrategy = SharingStrategy.LEND_AND_BORROW
    borrow_limit: int = -1
    in_share_preemption: Toggle = Toggle.DISABLED
    checkpoint_interval_seconds: float | None = None  # None: its jobs never checkpoint


class SimConfig(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    capacity: dict[str, int]  # instances per unit: the environment's maxCapacity and its hosts
    shares: list[ShareConfig]
    stop_seconds: float = 0.0  # how long a preempted attempt takes to stop (the grace)

    def share(self, name: str) -> ShareConfig | None:
        return next((s for s in self.shares if s.name == name), None)


class TraceJob(msgspec.Struct, frozen=True, rename="camel", forbid_unknown_fields=True):
    arrival: float
    duration: float
    share: str
    priority: int = 0
    instance_count: int = 1
    instance_type: str | None = None
    name: str | None = None


def _load(path: Path) -> Any:
    try:
        text = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror or err}") from err
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as err:
            raise ConfigError(
                f"{path}: YAML needs PyYAML (pip install pyyaml); JSON needs nothing"
            ) from err
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: {err}") from err
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError as err:
        raise ConfigError(f"{path}: not JSON ({err})") from err


def load_config(path: Path) -> SimConfig:
    try:
        config = msgspec.convert(_load(path), SimConfig)
    except msgspec.ValidationError as err:
        raise ConfigError(f"{path}: {err}") from err
    check_config(config, str(path))
    return config


def check_config(config: SimConfig, where: str = "config") -> None:
    """The rules of the API (spec section 1) that a simulated world needs."""
    if not 1 <= len(config.capacity) <= 5:
        raise ConfigError(f"{where}: capacity: 1 to 5 units, got {len(config.capacity)}")
    for unit, n in config.capacity.items():
        if n < 0:
            raise ConfigError(f"{where}: capacity.{unit}: must be >= 0, got {n}")
    if not 1 <= len(config.shares) <= MAX_SHARES:
        raise ConfigError(f"{where}: shares: 1 to {MAX_SHARES} shares, got {len(config.shares)}")
    seen: set[str] = set()
    for i, share in enumerate(config.shares):
        field = f"{where}: shares[{i}]"
        if share.name in seen:
            raise ConfigError(f"{field}.name: {share.name!r} appears twice")
        seen.add(share.name)
        for unit, n in share.limits.items():
            if unit not in config.capacity:
                raise ConfigError(f"{field}.limits.{unit}: not a unit of the capacity")
            if n < 0:
                raise ConfigError(f"{field}.limits.{unit}: must be >= 0, got {n}")
        if share.borrow_limit < -1:
            raise ConfigError(f"{field}.borrowLimit: -1 (unlimited) or a percentage >= 0")
        interval = share.checkpoint_interval_seconds
        if interval is not None and not interval > 0:
            raise ConfigError(f"{field}.checkpointIntervalSeconds: must be > 0, got {interval}")
    if config.stop_seconds < 0:
        raise ConfigError(f"{where}: stopSeconds: must be >= 0")


ALL_SHARES = "*"


def with_checkpoints(config: SimConfig, intervals: dict[str, float]) -> SimConfig:
    """`config` with these checkpoint intervals (share name, or `*` for every share, ->
    seconds; a named share wins over `*`); a share named that is not in it is an error."""
    for name, seconds in intervals.items():
        if name != ALL_SHARES and config.share(name) is None:
            raise ConfigError(f"--checkpoint-interval: {name!r} is not a share of the config")
        if not seconds > 0:
            raise ConfigError(f"--checkpoint-interval {name}: must be > 0 seconds, got {seconds}")
    every = intervals.get(ALL_SHARES)
    shares = []
    for share in config.shares:
        interval = intervals.get(share.name, every)
        if interval is not None:
            share = msgspec.structs.replace(share, checkpoint_interval_seconds=interval)
        shares.append(share)
    return msgspec.structs.replace(config, shares=shares)


def without_checkpoints(config: SimConfig) -> SimConfig:
    """`config` with no share checkpointing."""
    shares = [msgspec.structs.replace(s, checkpoint_interval_seconds=None) for s in config.shares]
    return msgspec.structs.replace(config, shares=shares)


def checkpoints(config: SimConfig) -> dict[str, float]:
    """Share -> checkpoint interval, for the shares that checkpoint."""
    return {
        s.name: s.checkpoint_interval_seconds
        for s in config.shares
        if s.checkpoint_interval_seconds is not None
    }


def read_trace(path: Path, config: SimConfig) -> Iterator[TraceJob]:
    """The trace's jobs, checked against the configuration."""
    decoder = msgspec.json.Decoder(TraceJob)
    only_unit = next(iter(config.capacity)) if len(config.capacity) == 1 else None
    try:
        lines = path.open("rb")
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror or err}") from err
    with lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                job = decoder.decode(line)
            except msgspec.DecodeError as err:
                raise ConfigError(f"{where}: {err}") from err
            if config.share(job.share) is None:
                raise ConfigError(f"{where}: share: {job.share!r} is not in the configuration")
            unit = job.instance_type or only_unit
            if unit is None or unit not in config.capacity:
                raise ConfigError(f"{where}: instanceType: {unit!r} is not a unit of the capacity")
            if job.duration <= 0 or job.arrival < 0 or job.instance_count < 1:
                raise ConfigError(
                    f"{where}: arrival >= 0, duration > 0 and instanceCount >= 1 are required"
                )
            yield msgspec.structs.replace(job, instance_type=unit)
