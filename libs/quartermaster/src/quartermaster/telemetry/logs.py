"""Logging for every service and `qm up`: readable text, or one JSON object per line.

JSON records always hold the same keys (`KEYS`; null when unknown), so a log
shipper can index them without guessing. Log sites that concern a job pass
`extra={"job_id": ..., "share": ..., "host": ..., "seq": ...}`; the service and
host of a task come from `scope` (set once where a service's task starts, so
`qm up`'s in-process services tell their lines apart), the trace id from the
span current in the task (or an explicit `extra={"trace_id": ...}`).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import json
import logging
import sys
from collections.abc import Coroutine, Iterator
from typing import Any, TextIO, TypeVar

from quartermaster.telemetry import traces
from quartermaster.telemetry.settings import LogFormat

T = TypeVar("T")
KEYS = ("ts", "level", "service", "message", "job_id", "share", "host", "seq", "trace_id")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

_service: contextvars.ContextVar[str | None] = contextvars.ContextVar("qm_service", default=None)
_host: contextvars.ContextVar[str | None] = contextvars.ContextVar("qm_host", default=None)

# Loggers of one service's package, for lines logged outside any `scope` (gRPC handlers).
_PACKAGES = (
    ("qm_admission", "qm-admission"),
    ("qm_scheduler", "qm-scheduler"),
    ("qm.scheduler", "qm-scheduler"),
    ("qm_warmpool", "qm-warmpool"),
    ("qm_node_agent", "qm-node-agent"),
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: `KEYS`, then `logger`, and `exc` when there is one."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        fields = record.__dict__
        line: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "service": fields.get("service") or _service.get() or self._package_service(record),
            "message": record.getMessage(),
            "job_id": fields.get("job_id"),
            "share": fields.get("share"),
            "host": fields.get("host") or _host.get(),
            "seq": fields.get("seq"),
            "trace_id": fields.get("trace_id") or traces.trace_id_of(traces.current()),
            "logger": record.name,
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)

    def _package_service(self, record: logging.LogRecord) -> str:
        for package, service in _PACKAGES:
            if record.name == package or record.name.startswith(package + "."):
                return service
        return self.service


def setup(
    service: str,
    log_format: LogFormat = LogFormat.TEXT,
    *,
    level: int | str = logging.INFO,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Send the root logger's records to `stream` (stderr) in `log_format`; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if log_format is LogFormat.JSON:
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    logging.captureWarnings(True)  # Python's warnings become records too (one format)
    return handler


def current() -> tuple[LogFormat, str]:
    """How this process logs now (`setup`'s format and the root level's name): what a
    process it starts should log with, so that their lines read alike."""
    root = logging.getLogger()
    json_lines = any(isinstance(h.formatter, JsonFormatter) for h in root.handlers)
    return (LogFormat.JSON if json_lines else LogFormat.TEXT), logging.getLevelName(
        root.getEffectiveLevel()
    )


@contextlib.contextmanager
def scope(service: str | None = None, host: str | None = None) -> Iterator[None]:
    """Lines logged in this block (and in tasks it starts) name this service and host."""
    tokens = []
    if service is not None:
        tokens.append((_service, _service.set(service)))
    if host is not None:
        tokens.append((_host, _host.set(host)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


async def scoped(coro: Coroutine[Any, Any, T], service: str, host: str | None = None) -> T:
    """Run `coro` (a service's main task) with its lines naming `service` and `host`."""
    with scope(service, host):
        return await coro
