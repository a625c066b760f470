"""Verifying a log file on several cores: each worker checks one stretch of decision messages.

Re-running the pass is the costly part of a verification, folding the cheap
one; so every worker folds the log from its start (alone, no checks) up to its
stretch, then checks the decision messages of that stretch. The stretches hold
equal numbers of decision messages. A worker's search for an older base reaches
back `reach` messages before its stretch; should any worker find a difference,
the whole log is verified again in one process, so a report that names
differences is exactly the sequential one. Host losses are judged with the
heartbeat timeout of the first one the log records, read once up front.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from quartermaster.audit.envelope import HOSTS_TOKEN, decision_token
from quartermaster.audit.gc_pause import paused_gc
from quartermaster.audit.logfile import read_log
from quartermaster.audit.verify import Report, Verifier, recorded_heartbeat_timeout, verify

MIN_MESSAGES_PER_WORKER = 20_000  # below this a worker costs more than it saves


def default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def _stretches(
    path: Path, workers: int, min_messages: int
) -> tuple[list[int], Report, float | None]:
    """Where each worker's stretch starts (seqs), the log's totals, the heartbeat timeout."""
    decisions: list[int] = []
    totals = Report()
    timeout: float | None = None
    first = True
    for envelope in read_log(path):
        if first and envelope.seq != 1:
            return [], totals, None  # the verifier says why, sequentially
        first = False
        totals.messages += 1
        totals.events += len(envelope.events)
        token = decision_token(envelope.subject)
        if token is None:
            continue
        decisions.append(envelope.seq)
        if timeout is None and token == HOSTS_TOKEN:
            timeout = recorded_heartbeat_timeout(envelope.events)
    workers = min(workers, max(1, totals.messages // min_messages), len(decisions))
    if workers <= 1:
        return [], totals, timeout
    per = len(decisions) / workers
    starts = [decisions[round(i * per)] for i in range(workers)]
    return [1, *starts[1:]], totals, timeout


def _verify_stretch(path: Path, start: int, end: int | None, timeout: float | None) -> Report:
    verifier = Verifier(timeout, check_from=start)
    for envelope in read_log(path):
        if end is not None and envelope.seq >= end:
            break
        verifier.feed(envelope)
    return verifier.report


def verify_file(
    path: Path,
    heartbeat_timeout_seconds: float | None = None,
    workers: int = 1,
    min_messages_per_worker: int = MIN_MESSAGES_PER_WORKER,
) -> Report:
    """`verify` of a log file, on up to `workers` processes (fewer for a short log), with
    the cyclic GC paused (`gc_pause`)."""
    with paused_gc():
        return _verify_file(path, heartbeat_timeout_seconds, workers, min_messages_per_worker)


def _verify_file(
    path: Path, heartbeat_timeout_seconds: float | None, workers: int, min_messages: int
) -> Report:
    starts: list[int] = []
    if workers > 1:
        starts, totals, recorded = _stretches(path, workers, min_messages)
    if not starts:
        return verify(read_log(path), heartbeat_timeout_seconds)
    timeout = heartbeat_timeout_seconds if heartbeat_timeout_seconds is not None else recorded
    ends: list[int | None] = [*starts[1:], None]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(len(starts), mp_context=context) as pool:
        parts = list(
            pool.map(_verify_stretch, [path] * len(starts), starts, ends, [timeout] * len(starts))
        )
    if any(part.differences for part in parts):
        return verify(read_log(path), heartbeat_timeout_seconds)
    merged = Report(
        messages=totals.messages, events=totals.events, heartbeat_timeout_seconds=timeout
    )
    for part in parts:
        merged.decision_messages += part.decision_messages
        merged.decisions += part.decisions
        merged.passes += part.passes
        merged.unchecked += part.unchecked
        merged.raced += part.raced
        merged.ignored.extend(part.ignored)
    return merged
