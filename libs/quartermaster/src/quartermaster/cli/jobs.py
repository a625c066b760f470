"""`qm job submit`, `submit-many`, `wait` and `logs`: the commands that do more than one call.

Requests are built here from the flags (not through `TrainingQueue`), so the
command line keeps its shape whatever the SDK-shaped client grows into.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.cli.options import UsageError, show
from quartermaster.client import Quartermaster, training_job
from quartermaster.client.logs import job_logs
from quartermaster.client.shapes import aws_output

TERMINAL = {pb.JOB_STATUS_SUCCEEDED, pb.JOB_STATUS_FAILED}
CHUNK_MAX = 1000  # SubmitServiceJobs takes at most this many jobs per call

# What a line of a submit-many file may hold: the flags of `qm job submit`.
ENTRY_FIELDS = {
    "queue",
    "share",
    "name",
    "priority",
    "command",
    "image",
    "instance_type",
    "count",
    "keep_alive",
    "max_runtime",
    "timeout",
    "attempts",
    "client_token",
    "environment",
    "tags",
    "channels",
    "output_path",
    "hyperparameters",
    "role",
    "checkpoint_s3",
    "checkpoint_local",
}


def status_name(value: int) -> str:
    return str(pb.JobStatus.Name(value)).removeprefix("JOB_STATUS_")


def submission(entry: Mapping[str, Any]) -> pb.SubmitServiceJobRequest:
    """One submission from the flags of `qm job submit` (or a line of a submit-many file)."""
    command = entry.get("command") or []
    if isinstance(command, str) or not all(isinstance(word, str) for word in command):
        raise UsageError(
            f"command must be a list of strings, got {command!r} (in YAML, quote words "
            "such as 'true' or '1')"
        )
    if not command and not entry.get("image"):
        raise UsageError(
            "no command: give the job's command after `--` (e.g. `-- python train.py`), "
            "or --image for an image's own entrypoint"
        )
    environment = {str(k): str(v) for k, v in dict(entry.get("environment") or {}).items()}
    environment.update(dict(entry.get("env_vars") or ()))
    extra: dict[str, Any] = {}
    if entry.get("role"):
        extra["role_arn"] = str(entry["role"])
    payload = training_job(
        image=entry.get("image") or "",
        command=command,
        instance_type=entry.get("instance_type") or "ml.g5.xlarge",
        instance_count=int(entry.get("count") or 1),
        keep_alive_seconds=int(entry.get("keep_alive") or 0),
        max_runtime_seconds=entry.get("max_runtime"),
        environment=environment,
        hyperparameters={
            str(k): str(v) for k, v in dict(entry.get("hyperparameters") or ()).items()
        },
        channels={str(k): str(v) for k, v in dict(entry.get("channels") or ()).items()},
        output_path=entry.get("output_path") or None,
        checkpoint_s3_uri=entry.get("checkpoint_s3") or None,
        checkpoint_local_path=entry.get("checkpoint_local") or None,
        **extra,
    )
    request = pb.SubmitServiceJobRequest(
        job_name=str(entry["name"]),
        job_queue=str(entry["queue"]),
        quota_share_name=str(entry["share"]),
        service_job_type="SAGEMAKER_TRAINING",
        service_request_payload=json.dumps(payload),
        scheduling_priority=int(entry.get("priority") or 0),
        tags={str(k): str(v) for k, v in dict(entry.get("tags") or {}).items()},
        client_token=entry.get("client_token") or "",
    )
    if entry.get("attempts"):
        request.retry_strategy.attempts = int(entry["attempts"])
    if entry.get("timeout"):
        request.timeout_config.attempt_duration_seconds = int(entry["timeout"])
    return request


def _strings(pairs: Mapping[Any, Any] | Iterable[tuple[Any, Any]] | None) -> dict[str, str]:
    """{name: value} from a mapping (a submit-many line) or NAME=VALUE pairs (flags)."""
    if not pairs:
        return {}
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return {str(k): str(v) for k, v in items}


def job_submit(c: Quartermaster, a: argparse.Namespace) -> int:
    request = submission(vars(a) | {"command": a.argv})
    request.dry_run = a.dry_run
    response = c.call(c.jobs.SubmitServiceJob, request)
    if a.dry_run:  # nothing is submitted: what the pass would do with it now
        show(response.dry_run_result)
    else:
        print(response.job_id)
    return 0


# ---- submit-many -------------------------------------------------------------------


def read_entries(path: Path) -> list[dict[str, Any]]:
    """A YAML list of submissions, or JSON Lines (one object a line)."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from err
    entries: Any
    if path.suffix in (".jsonl", ".ndjson") or text.lstrip().startswith("{"):
        entries = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except ValueError as err:
                    raise UsageError(f"{path}:{number}: not JSON: {err}") from err
    else:
        try:
            entries = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise UsageError(f"{path}: not YAML: {err}") from err
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: expected a list of submissions (mappings)")
    for number, entry in enumerate(entries, 1):
        unknown = set(entry) - ENTRY_FIELDS
        if unknown:
            raise UsageError(
                f"{path}: submission {number}: unknown field(s) {', '.join(sorted(unknown))} "
                f"(fields: {', '.join(sorted(ENTRY_FIELDS))})"
            )
    return entries


def requests_of(entries: Sequence[dict[str, Any]], a: argparse.Namespace) -> list[Any]:
    defaults = {k: v for k, v in (("queue", a.queue), ("share", a.share)) if v}
    out = []
    for number, entry in enumerate(entries, 1):
        merged = defaults | entry
        missing = [k for k in ("queue", "share", "name") if not merged.get(k)]
        if missing:
            raise UsageError(f"submission {number}: needs {', '.join(missing)}")
        try:
            out.append(submission(merged))
        except (TypeError, ValueError) as err:
            raise UsageError(f"submission {number}: {err}") from err
        except UsageError as err:
            raise UsageError(f"submission {number}: {err}") from err
    return out


def job_submit_many(c: Quartermaster, a: argparse.Namespace) -> int:
    from rich.progress import Progress

    requests = requests_of(read_entries(Path(a.file)), a)
    failures: list[str] = []
    submitted: list[pb.SubmitServiceJobResponse] = []
    with Progress(console=_stderr_console(), transient=not a.quiet) as progress:
        task = progress.add_task("submitting", total=len(requests))
        for start in range(0, len(requests), a.chunk):
            chunk = requests[start : start + a.chunk]
            response = c.call(c.jobs.SubmitServiceJobs, pb.SubmitServiceJobsRequest(jobs=chunk))
            for result in response.results:
                name = chunk[result.index].job_name
                if result.HasField("error"):
                    e = result.error
                    failures.append(f"{name}: {e.code}: {e.field}: {e.message}")
                else:
                    submitted.append(result.job)
            progress.advance(task, len(chunk))
    if a.output == "json":  # each as SubmitServiceJob's output: jobArn, jobName, jobId
        print(json.dumps([aws_output(job) for job in submitted], indent=2))
    else:
        for job in submitted:
            print(f"{job.job_id}  {job.job_name}")
    for failure in failures:
        print(f"qm: error: {failure}", file=sys.stderr)
    print(f"submitted {len(submitted)} of {len(requests)}", file=sys.stderr)
    return 1 if failures else 0


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


# ---- wait and logs -----------------------------------------------------------------


def job_wait(c: Quartermaster, a: argparse.Namespace) -> int:
    """Print each status change on stderr until the job ends; its final status on stdout."""
    import time

    deadline = time.monotonic() + a.timeout
    detail = c.describe_job(a.job_id)
    shown = _progress(detail.job_name, detail.status, detail.status_reason, None)
    while detail.status not in TERMINAL:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"job {a.job_id} is still {status_name(detail.status)} after {a.timeout:g} s"
            )
        for change in c.watch(job_ids=[a.job_id], timeout=left):
            shown = _progress(change.job_name, change.status, change.status_reason, shown)
            if change.status in TERMINAL:
                break
        detail = c.describe_job(a.job_id)
    print(status_name(detail.status))
    if detail.status == pb.JOB_STATUS_FAILED:
        print(f"qm: error: job {a.job_id} failed: {detail.status_reason}", file=sys.stderr)
        return 1
    return 0


def _progress(name: str, status: int, reason: str, shown: str | None) -> str:
    line = f"{name}: {status_name(status)}" + (f" ({reason})" if reason else "")
    if line != shown:
        print(line, file=sys.stderr, flush=True)
    return line


def job_logs_command(c: Quartermaster, a: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    chunks = job_logs(c, a.job_id, attempt=a.attempt, host_id=a.host or "", follow=a.follow)
    for chunk in chunks:
        if chunk.skipped_bytes:
            note = f"\n[qm: {chunk.skipped_bytes} bytes over the node's log cap not kept]\n"
            out.write(note.encode())
        out.write(chunk.data)
        out.flush()
    return 0
