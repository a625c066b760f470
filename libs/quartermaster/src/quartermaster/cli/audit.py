"""The auditor's commands: `qm log export|import`, `qm audit verify|state`, `qm explain`,
`qm simulate`.

Each sets `run` (it opens what it needs itself). Offline work (`--from-file`,
`simulate`) needs only the core; reading the live stream needs the `bus` extra
and says so when it is missing. The live log is found as `quartermaster.cli.bus`
says: `--nats-url`, `--stream`, `--subject-prefix`, the `QM_AUDIT_*` settings, or
the stack file `qm up` writes in `--data-dir`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec

from quartermaster.audit.envelope import Envelope
from quartermaster.audit.errors import AuditError, ConfigError, TransientAuditError
from quartermaster.audit.instants import epoch_of
from quartermaster.audit.logfile import Format, read_log
from quartermaster.cli.audit_render import (
    render_comparison,
    render_explanation,
    render_instant,
    render_report,
)
from quartermaster.cli.bus import add_bus_flags, add_data_dir, admission_of, bus_target, open_bus

BUS_EXTRA = "reading the live log needs the bus extra: pip install 'quartermaster[bus]'"
Run = Callable[[argparse.Namespace], int]


# ---- where the log comes from ------------------------------------------------


def _source_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from-file", type=Path, default=None, help="an exported log instead of the stream"
    )
    add_bus_flags(p)


async def _stream(a: argparse.Namespace, to_seq: int | None = None) -> AsyncIterator[Envelope]:
    from quartermaster.audit.stream import read_range

    async with open_bus(a) as event_log:
        async for envelope in read_range(event_log, 1, to_seq):
            yield envelope


def _each(
    a: argparse.Namespace, feed: Callable[[Envelope], Any], to_seq: int | None = None
) -> None:
    """Feed every envelope of the chosen source, in order."""
    if a.from_file is not None:
        for envelope in read_log(a.from_file):
            if to_seq is not None and envelope.seq > to_seq:
                break
            feed(envelope)
        return

    async def pump() -> None:
        async for envelope in _stream(a, to_seq):
            feed(envelope)

    asyncio.run(pump())


def _guarded(run: Run) -> Run:
    """Audit errors and a missing extra become one line on stderr: exit status 1 where
    the log could not be reached or read (a failed call), 2 for wrong input."""

    def guarded(a: argparse.Namespace) -> int:
        try:
            return run(a)
        except TransientAuditError as err:
            print(f"qm: error: {err}", file=sys.stderr)
            return 1
        except AuditError as err:
            print(f"qm: error: {err}", file=sys.stderr)
        except OSError as err:  # a stack file or credentials not readable
            print(f"qm: error: {err}", file=sys.stderr)
            return 1
        except ModuleNotFoundError as err:
            if err.name is None or not err.name.startswith("nats"):
                raise
            print(f"qm: error: {BUS_EXTRA} (or read an export with --from-file)", file=sys.stderr)
        return 2

    return guarded


# ---- commands ---------------------------------------------------------------------


def export_log(a: argparse.Namespace) -> int:
    from quartermaster.audit.export import Exported, export_from

    async def run() -> Exported:
        async with open_bus(a) as event_log:
            return await export_from(event_log, a.out, Format(a.format), a.from_seq, a.to_seq)

    done = asyncio.run(run())
    print(
        f"exported {done.messages} messages ({done.events} events), "
        f"seq {done.first_seq}-{done.last_seq}, to {a.out}"
    )
    return 0


def import_log(a: argparse.Namespace) -> int:
    """Into an empty stream only; a refusal is one line and exit status 1, as is a bus that
    does not answer. As the stack's admin user (the auditor may not write)."""
    from quartermaster.audit.log_import import (
        Imported,
        RestoreRefusedError,
        import_log,
        open_target,
    )
    from quartermaster.embedded.nats_auth import BusLayout

    target = bus_target(a, admin=True)
    settings = target.settings
    if a.stream_replicas is not None:
        settings = msgspec.structs.replace(settings, stream_replicas=a.stream_replicas)
    layout = BusLayout(
        stream=settings.stream,
        subject_prefix=settings.subject_prefix,
        snapshot_bucket=a.snapshot_bucket,
        lease_bucket=a.lease_bucket,
    )

    async def run() -> Imported:
        async with open_target(settings, layout, source=target.source) as event_log:
            return await import_log(event_log, a.file, a.snapshot_bucket)

    try:
        done = asyncio.run(run())
    except RestoreRefusedError as err:
        print(f"qm: error: {err}", file=sys.stderr)
        return 1
    moved = f" (subjects moved from prefix {done.moved_from})" if done.moved_from else ""
    print(
        f"imported {done.messages} messages ({done.events} events), "
        f"seq 1-{done.messages}, into stream {settings.stream}{moved}"
    )
    return 0


def verify_log(a: argparse.Namespace) -> int:
    from quartermaster.audit.gc_pause import paused_gc
    from quartermaster.audit.parallel import default_workers, verify_file
    from quartermaster.audit.verify import Verifier

    started = time.perf_counter()
    workers = a.workers if a.workers is not None else default_workers()
    if a.from_file is not None:
        report = verify_file(a.from_file, a.heartbeat_timeout, workers)
    else:
        verifier = Verifier(a.heartbeat_timeout)
        with paused_gc():
            _each(a, verifier.feed)
        report = verifier.report
    print(render_report(report, time.perf_counter() - started, a.max_differences))
    return 0 if report.ok else 1


def audit_state(a: argparse.Namespace) -> int:
    from quartermaster.audit.replay import fold_until, instant

    seq, at = parse_instant(a.at)
    envelopes: list[Envelope] = []
    _each(a, envelopes.append, to_seq=seq)
    state, position = fold_until(envelopes, seq, at)
    print(render_instant(instant(state, position, a.heads, a.queue)))
    return 0


def explain_job(a: argparse.Namespace) -> int:
    from quartermaster.audit.explain import Explainer

    if a.from_file is not None:
        explainer = Explainer(a.job_id)
        _each(a, explainer.feed)
        print(render_explanation(explainer.result()))
        return 0
    from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
    from quartermaster.audit.wire import from_proto
    from quartermaster.client import Quartermaster, QuartermasterError

    address, credentials = admission_of(a)
    with Quartermaster(address, credentials_dir=credentials, insecure=a.insecure or None) as client:
        try:
            reply = client.call(
                client.jobs.ExplainServiceJob, pb.ExplainServiceJobRequest(job_id=a.job_id)
            )
        except QuartermasterError as err:
            print(f"qm: error: {err}", file=sys.stderr)
            return 1
    print(render_explanation(from_proto(reply)))
    return 0


def simulate_jobs(a: argparse.Namespace) -> int:
    from quartermaster.audit import simconfig
    from quartermaster.audit.recorded import recorded_jobs
    from quartermaster.audit.simulate import compare, trace_jobs
    from quartermaster.audit.timeline_svg import render

    if a.trace is not None:
        if a.config is None:
            raise ConfigError("--config is required with --trace")
        config = simconfig.load_config(a.config)
        jobs = trace_jobs(simconfig.read_trace(a.trace, config))
    else:
        recorded = recorded_jobs(read_log(a.log), a.queue)
        config = simconfig.load_config(a.config) if a.config is not None else recorded.config
        jobs = recorded.jobs_for(config)
        print(recorded.summary())
    if a.checkpoint_interval:
        config = simconfig.with_checkpoints(config, dict(a.checkpoint_interval))
    started = time.perf_counter()
    comparison = compare(config, jobs, workers=a.workers)
    print(render_comparison(comparison, time.perf_counter() - started))
    if a.svg is not None:
        limits = {s.name: sum(s.limits.values()) for s in config.shares}
        a.svg.write_text(render(comparison.candidate, limits))
        print(f"timeline: {a.svg}")
    return 0


def _share_seconds(text: str) -> tuple[str, float]:
    """`research=600` -> ("research", 600.0) (`--checkpoint-interval`)."""
    share, sep, seconds = text.rpartition("=")
    try:
        value = float(seconds)
    except ValueError:
        value = float("nan")
    if not sep or not share or not value > 0:
        raise argparse.ArgumentTypeError(f"SHARE=SECONDS with SECONDS > 0, got {text!r}")
    return share, value


# ---- the instant of `qm audit state --at` -------------------------------------------


def parse_instant(text: str) -> tuple[int | None, float | None]:
    """`42` -> seq 42; `@1700000000.5` -> epoch seconds; else an ISO 8601 time (UTC if naive)."""
    if text.isdigit():
        return int(text), None
    at = epoch_of(text)
    if at is not None:
        return None, at
    raise AuditError(f"--at: a sequence number, @EPOCH_SECONDS or an ISO 8601 time, got {text!r}")


# ---- the parser -----------------------------------------------------------------------


def register(groups: Any) -> None:
    """Add `log`, `audit`, `explain` and `simulate` to `qm`."""

    def sub(name: str, help_: str) -> Any:
        return groups.add_parser(name, help=help_).add_subparsers(dest="command", required=True)

    def command(parent: Any, name: str, run: Run, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = parent.add_parser(name, help=help_)
        p.set_defaults(run=_guarded(run))
        return p

    log = sub("log", "the event log")
    p = command(log, "export", export_log, "write the stream (or a range) to a file")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--from-seq", type=int, default=1)
    p.add_argument("--to-seq", type=int, default=None)
    p.add_argument("--format", choices=[f.value for f in Format], default=Format.JSONL.value)
    add_bus_flags(p)
    p = command(
        log,
        "import",
        import_log,
        "load an exported log into an empty stream (as the stack's admin NATS user)",
    )
    p.add_argument("file", type=Path, help="a file `qm log export` wrote (either format)")
    add_bus_flags(p)
    p.add_argument(
        "--stream-replicas",
        type=int,
        default=None,
        help="replicas of a stream the import makes (default: $QM_BOOTSTRAP_STREAM_REPLICAS, "
        "else 1); an existing stream is left as it is",
    )
    p.add_argument("--snapshot-bucket", default="qm-snapshots", help="the scheduler's")
    p.add_argument("--lease-bucket", default="qm-leases", help="the scheduler's")

    audit = sub("audit", "replay audits of the event log")
    p = command(audit, "verify", verify_log, "re-run the pass wherever decisions were recorded")
    _source_flags(p)
    p.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=None,
        help="the scheduler's host heartbeat timeout (default: read from the log's host losses)",
    )
    p.add_argument("--max-differences", type=int, default=20, help="differences to print")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes for a --from-file log (default: one per core, up to 8; 1: sequential)",
    )
    p = command(audit, "state", audit_state, "usage, queue heads and warm pools at a past instant")
    _source_flags(p)
    p.add_argument("--at", required=True, metavar="SEQ|TIME", help="42, @EPOCH or ISO 8601")
    p.add_argument("--queue", default=None)
    p.add_argument("--heads", type=int, default=3, help="queue heads per share")

    p = groups.add_parser("explain", help="a job's history from the log, with its decisions")
    p.set_defaults(run=_guarded(explain_job))
    p.add_argument("job_id")
    p.add_argument(
        "--from-file", type=Path, default=None, help="an exported log instead of asking admission"
    )
    add_data_dir(p, "where `qm up` wrote stack.json and credentials/ (admission's address)")

    p = groups.add_parser("simulate", help="replay jobs against a candidate configuration")
    p.set_defaults(run=_guarded(simulate_jobs))
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--trace", type=Path, help="JSON lines: arrival, duration, share, ...")
    what.add_argument("--log", type=Path, help="an exported log whose jobs to replay")
    p.add_argument("--config", type=Path, default=None, help="candidate (default: the log's own)")
    p.add_argument("--queue", default=None, help="the recorded queue to replay (--log)")
    p.add_argument("--svg", type=Path, default=None, help="write the utilization timeline here")
    p.add_argument(
        "--checkpoint-interval",
        type=_share_seconds,
        action="append",
        default=[],
        metavar="SHARE=SECONDS",
        help="the share's jobs checkpoint this often (repeatable; SHARE * for every share); "
        "lost work is then reported with and without checkpoints",
    )
    p.add_argument(
        "--workers", type=int, default=3, help="processes: one per scenario (1: one after another)"
    )
