"""Warm-pool service settings, read once from `QM_WARMPOOL_*` environment variables."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from quartermaster.envsettings import from_env


class WarmPoolSettings(msgspec.Struct, frozen=True, kw_only=True):
    nats_url: str = "nats://127.0.0.1:4222"
    stream: str = "QM"
    subject_prefix: str = "qm"
    tick_seconds: float = 5.0  # regular ticks: host liveness is judged on them

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> WarmPoolSettings:
        return from_env(cls, "QM_WARMPOOL_", env)
