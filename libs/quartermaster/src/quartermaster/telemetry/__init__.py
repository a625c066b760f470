"""What a running service tells its operators besides metrics: logs and traces.

`start(service, settings)` is what each service's composition root calls first:
it sets up logging (`logs`) and, when `otel_exporter` is set, OpenTelemetry
spans (`traces`, needs the `quartermaster[tracing]` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator, Sequence

from quartermaster.envsettings import SettingsError
from quartermaster.telemetry import logs, traces
from quartermaster.telemetry.settings import LogFormat, SpanExporterKind, TelemetrySettings

__all__ = [
    "LogFormat",
    "SpanExporterKind",
    "TelemetrySettings",
    "add_arguments",
    "log_format_flag",
    "logs",
    "running",
    "start",
    "traces",
]


def start(
    service: str,
    settings: TelemetrySettings,
    *,
    log_format: LogFormat | None = None,
    traced: Iterable[str] | None = None,
) -> None:
    """Logging as `settings` (or the `--log-format` flag) says; spans of `traced` (this service)."""
    logs.setup(service, log_format or settings.log_format, level=settings.log_level)
    traces.configure(settings, [service] if traced is None else traced)


def add_arguments(parser: argparse.ArgumentParser, default: LogFormat | None = None) -> None:
    """`--log-format text|json` (None: a service's `LOG_FORMAT` setting decides)."""
    parser.add_argument(
        "--log-format",
        type=LogFormat,
        choices=list(LogFormat),
        default=default,
        help="text, or json: one JSON object per line with fixed keys"
        + ("" if default else " (default: the LOG_FORMAT setting, else text)"),
    )


def log_format_flag(argv: Sequence[str] | None = None) -> LogFormat | None:
    """The `--log-format` of a service's command line (the mains take no other flag)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv).log_format  # type: ignore[no-any-return]


@contextlib.contextmanager
def running(
    service: str, prefix: str, argv: Sequence[str] | None = None
) -> Iterator[TelemetrySettings]:
    """A service main's telemetry: from `<prefix>*` settings and `--log-format`; spans
    are flushed on the way out. A bad setting ends the process with its reason (exit 2)."""
    try:
        settings = TelemetrySettings.from_env(prefix)
        start(service, settings, log_format=log_format_flag(argv))
    except (SettingsError, traces.TracingUnavailable) as err:
        print(f"{service}: {err}", file=sys.stderr)
        raise SystemExit(2) from err
    try:
        yield settings
    finally:
        traces.shutdown()
