"""Settings of the admission service: one frozen struct, read once from the environment.

Every variable is `QM_ADMISSION_<FIELD>` (upper case); nothing else reads the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import msgspec

from qm_admission.errors import PermanentAdmissionError

PREFIX = "QM_ADMISSION_"


class SettingsError(PermanentAdmissionError):
    """An environment variable has a value of the wrong type."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    grpc_host: str = "127.0.0.1"
    grpc_port: int = 0  # 0: any free port (logged at start)
    nats_url: str = "nats://127.0.0.1:4222"
    stream: str = "QM"
    subject_prefix: str = "qm"
    postgres_url: str = "postgresql://postgres@127.0.0.1:5432/quartermaster"
    pg_schema: str = "qm"
    max_keep_alive_seconds: int = 3600
    read_timeout_seconds: float = 10.0
    shutdown_grace_seconds: float = 5.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Fields from `QM_ADMISSION_*` variables; unset ones keep their defaults."""
        env = os.environ if environ is None else environ
        given = {
            field: env[PREFIX + field.upper()]
            for field in cls.__struct_fields__
            if PREFIX + field.upper() in env
        }
        try:
            return msgspec.convert(given, cls, strict=False)
        except msgspec.ValidationError as err:
            raise SettingsError(f"bad {PREFIX}* setting: {err}") from err
