"""The telemetry part of a service's configuration: how it logs and where its spans go.

Read with the service's own prefix by the shared mechanism (`envsettings.from_env`),
so `QM_SCHEDULER_LOG_FORMAT=json` or `QM_ADMISSION_OTEL_EXPORTER=otlp` configure one
service; `qm up` takes the same as flags for all of its services at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

import msgspec

from quartermaster.envsettings import from_env


class LogFormat(StrEnum):
    TEXT = "text"  # readable lines (the default)
    JSON = "json"  # one JSON object per record, fixed keys (`telemetry.logs.KEYS`)


class SpanExporterKind(StrEnum):
    OFF = ""  # no tracing: every span call is a no-op
    OTLP = "otlp"  # OTLP over gRPC to `otel_endpoint` (a collector, Jaeger, Tempo)
    CONSOLE = "console"  # spans printed as JSON on stdout (debugging)


class TelemetrySettings(msgspec.Struct, frozen=True, kw_only=True):
    log_format: LogFormat = LogFormat.TEXT
    log_level: str = "INFO"
    otel_exporter: SpanExporterKind = SpanExporterKind.OFF  # needs `quartermaster[tracing]`
    otel_endpoint: str = ""  # OTLP gRPC endpoint; "" = the exporter's own default
    otel_sample_ratio: float = 1.0  # share of new traces kept (children follow their parent)

    @classmethod
    def from_env(cls, prefix: str, env: Mapping[str, str] | None = None) -> TelemetrySettings:
        return from_env(cls, prefix, env)
