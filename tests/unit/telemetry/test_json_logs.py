"""Service logs: readable text by default, one JSON object per line with fixed keys."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from quartermaster.telemetry import LogFormat, TelemetrySettings, logs, traces


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)
    traces.shutdown()


def lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_json_lines_hold_every_key_null_when_unknown(restore_root: None) -> None:
    out = io.StringIO()
    logs.setup("qm-scheduler", LogFormat.JSON, stream=out)
    log = logging.getLogger("quartermaster.eventlog.follower")
    log.info("folded %d", 3)
    log.warning(
        "job went %s",
        "RUNNABLE",
        extra={"job_id": "j1", "share": "QS1", "host": "node-1", "seq": 42},
    )
    first, second = lines(out)
    assert set(logs.KEYS) <= set(first)
    assert first["message"] == "folded 3" and first["level"] == "INFO"
    assert first["service"] == "qm-scheduler"
    assert all(first[key] is None for key in ("job_id", "share", "host", "seq", "trace_id"))
    assert (second["job_id"], second["share"], second["host"], second["seq"]) == (
        "j1",
        "QS1",
        "node-1",
        42,
    )
    assert str(first["ts"]).endswith("+00:00")


def test_a_traceback_stays_on_its_line(restore_root: None) -> None:
    out = io.StringIO()
    logs.setup("qm-admission", LogFormat.JSON, stream=out)
    try:
        raise ValueError("bad")
    except ValueError:
        logging.getLogger("qm_admission.writer").exception("append failed")
    (line,) = lines(out)
    assert "ValueError: bad" in str(line["exc"])


def test_scope_names_the_service_and_host_of_an_in_process_part(restore_root: None) -> None:
    out = io.StringIO()
    logs.setup("qm-stack", LogFormat.JSON, stream=out)
    with logs.scope("qm-node-agent", host="node-2"):
        logging.getLogger("quartermaster.bus.jetstream").info("reconnected")
    logging.getLogger("qm_admission.server").info("serving")  # its package names it
    logging.getLogger("qm.stack").info("up")
    agent, admission, stack = lines(out)
    assert (agent["service"], agent["host"]) == ("qm-node-agent", "node-2")
    assert (admission["service"], admission["host"]) == ("qm-admission", None)
    assert stack["service"] == "qm-stack"


def test_the_trace_id_is_that_of_the_current_span(restore_root: None) -> None:
    out = io.StringIO()
    logs.setup("qm-admission", LogFormat.JSON, stream=out)
    traces.install(InMemorySpanExporter(), ["qm-admission"], batch=False)
    with traces.current_span("qm-admission", "rpc") as span:
        logging.getLogger("qm_admission").info("inside")
    logging.getLogger("qm_admission").info("outside")
    inside, outside = lines(out)
    assert inside["trace_id"] == traces.trace_id_of(span.traceparent) is not None
    assert outside["trace_id"] is None


def test_text_is_the_default(restore_root: None) -> None:
    out = io.StringIO()
    settings = TelemetrySettings.from_env("QM_SCHEDULER_", {})
    assert settings.log_format is LogFormat.TEXT
    logs.setup("qm-scheduler", settings.log_format, stream=out)
    logging.getLogger("qm.scheduler").info("pass: %d decisions", 2)
    text = out.getvalue()
    assert "INFO qm.scheduler pass: 2 decisions" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_the_setting_is_read_with_the_services_prefix() -> None:
    settings = TelemetrySettings.from_env("QM_ADMISSION_", {"QM_ADMISSION_LOG_FORMAT": "json"})
    assert settings.log_format is LogFormat.JSON
