"""Warm-pool service settings, read once from `QM_WARMPOOL_*` environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgspec


class WarmPoolSettings(msgspec.Struct, frozen=True, kw_only=True):
    nats_url: str = "nats://127.0.0.1:4222"
    stream: str = "QM"
    subject_prefix: str = "qm"
    tick_seconds: float = 5.0  # regular ticks: host liveness is judged on them

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WarmPoolSettings:
        env = os.environ if env is None else env
        return cls(
            nats_url=env.get("QM_WARMPOOL_NATS_URL", cls.nats_url),
            stream=env.get("QM_WARMPOOL_STREAM", cls.stream),
            subject_prefix=env.get("QM_WARMPOOL_SUBJECT_PREFIX", cls.subject_prefix),
            tick_seconds=float(env.get("QM_WARMPOOL_TICK_SECONDS", str(cls.tick_seconds))),
        )
