"""Runs this host's part of one attempt: launch or adopt, supervise, report how it ended.

Reports, in order: JobStarting, JobRunning, then exactly one of JobSucceeded,
JobFailed or JobStopConfirmed (JobRunning does not wait for JobStarting's ack: a
retried JobStarting may land after it, which the fold takes). A start quicker
than `STARTING_AFTER_S` (a process) sends JobStarting and JobRunning in one
message: one append, one fold and one projection fewer per job. The final report
is saved in the attempt's record before it is appended, so a restart appends it
again (same msg id) instead of guessing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from qm_node_agent.contract.checkpoints import CheckpointSync, Round
from qm_node_agent.contract.outputs import collect, failure_reason
from qm_node_agent.errors import LaunchError, RuntimeFailure
from qm_node_agent.launch import LaunchSpec
from qm_node_agent.records import AttemptRecord, AttemptStore, Outcome
from qm_node_agent.reporter import Reporter
from qm_node_agent.runtime.base import ExitStatus, JobRuntime, RunningJob
from quartermaster import events as ev
from quartermaster.bus import PermanentBusError
from quartermaster.events import FailureClass
from quartermaster.objectstore import S3Access, StoreClientError, StoreUnavailable
from quartermaster.telemetry import traces

log = logging.getLogger(__name__)

SERVICE = "qm-node-agent"
TIMEOUT_REASON = "Job attempt duration exceeded timeout"
LOST_REASON = "node agent restarted and lost the attempt"
# A start that takes longer (a pull, a container) shows STARTING on its own meanwhile.
STARTING_AFTER_S = 0.05
CHECKPOINT_SCAN_S = 2.0  # how often a running job's checkpoint folder is mirrored
CHECKPOINT_BACKOFF_MAX_S = 60.0
CHECKPOINT_FLUSH_MIN_S = 30.0  # the final flush may take the stop grace, at least this
E = TypeVar("E", bound=ev.Event)


async def _settle(flush: asyncio.Future[None]) -> None:
    """Wait for a flush whose outcome no longer matters (an error on the way out)."""
    try:
        await asyncio.shield(flush)
    except Exception:
        log.exception("attempt record flush failed")


class StartingReport:
    """This attempt's JobStarting: sent on its own once the start has taken
    `STARTING_AFTER_S` (or when it ends without running), else with JobRunning."""

    def __init__(self, event: ev.JobStarting, send: Callable[[], Awaitable[int]]) -> None:
        self.event = event
        self._send = send
        self._sent: asyncio.Future[int] | None = None
        self._timer = asyncio.get_running_loop().call_later(STARTING_AFTER_S, self.send)

    def send(self) -> asyncio.Future[int]:
        """Sent on its own now (if not yet); its report's future."""
        self._timer.cancel()
        if self._sent is None:
            self._sent = asyncio.ensure_future(self._send())
        return self._sent

    def take(self) -> ev.JobStarting | None:
        """The event, to go with JobRunning; None if it was sent on its own."""
        self._timer.cancel()
        if self._sent is not None:
            return None
        self._sent = asyncio.get_running_loop().create_future()
        self._sent.set_result(0)
        return self.event

    def cancel(self) -> None:
        self._timer.cancel()
        if self._sent is not None:
            self._sent.cancel()


class AttemptRunner:
    def __init__(
        self,
        record: AttemptRecord,
        *,
        runtime: JobRuntime,
        store: AttemptStore,
        reporter: Reporter,
        grace_s: float,
        clock: Callable[[], float] = time.time,
        on_running: Callable[[ev.JobRunning], None] | None = None,
        access_for: Callable[[str], S3Access | None] = lambda _role: None,
        checkpointed: Callable[[AttemptRecord, Round], Awaitable[None]] | None = None,
    ) -> None:
        """`on_running`: told of this host's JobRunning once it is stored. `access_for`:
        the object-store credentials of an execution role (None: it has none)."""
        self.record = record
        self._access_for = access_for
        self._checkpointed = checkpointed
        self._on_running = on_running
        self._runtime = runtime
        self._store = store
        self._reporter = reporter
        self._grace_s = grace_s
        self._clock = clock
        self._stop = asyncio.Event()
        self._sync: CheckpointSync | None = None
        self.stop_reason = ""
        # The span this host's reports are made under (none unless the job is traced).
        self._spans: list[traces.Span] = []
        self.trace: str | None = None
        # Done when the part is removed, once its end is reported: an agent stopping
        # lets the removal finish.
        self.cleanup: asyncio.Future[None] | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.record.key

    def request_stop(self, reason: str) -> None:
        """Stop the part (its end is reported as a stop). Nothing to stop once its end is
        being reported: the log then says it is over here, mostly before the report's
        ack has come back."""
        if self.record.outcome is not None:
            return
        if not self._stop.is_set():
            self.stop_reason = reason
            self._stop.set()
            self._log("stop requested: %s", reason)

    # ---- entry points ---------------------------------------------------------
    async def launch(
        self, spec: LaunchSpec | LaunchError, timeout_s: int | None, trace: str | None = None
    ) -> None:
        """Save the record durably, then start the part and see it through.

        `trace`: the dispatch decision's traceparent; the start (until running) and
        the run (until the final report) are spans under it.
        """
        self._open_span("node_agent.start", trace)
        try:
            await self._launch(spec, timeout_s)
        finally:
            for span in reversed(self._spans):
                span.end()
            self._spans.clear()

    async def _launch(self, spec: LaunchSpec | LaunchError, timeout_s: int | None) -> None:
        # The record is written before anything starts, so that a restart never launches
        # it again, and made durable while the part starts: an agent crash keeps a write
        # (it is in the page cache), and a host crash before the flush ends takes the
        # started part down with it, so no restart finds the part running without its
        # record. JobRunning waits for the flush. JobStarting guards nothing the restart
        # reads (one that finds no record launches, and nothing ran yet): it goes out on
        # its own if the start is slow, else with JobRunning. JobRunning does not wait for
        # its ack: the fold takes the two in either order (a JobStarting after JobRunning
        # changes nothing). A final report waits for it.
        event = self._event(ev.JobStarting)
        trace = self.trace
        starting = StartingReport(event, lambda: self._reporter.report(event, trace))
        try:
            self._store.note(self.record)
        except BaseException:
            starting.cancel()
            raise
        durable = self._store.flush()
        try:
            started = await self._start(spec)
        except BaseException:
            starting.cancel()
            await _settle(durable)
            raise
        try:
            await durable
        except asyncio.CancelledError:  # the agent stops: the next one adopts the part
            starting.cancel()
            raise
        except BaseException:  # not durable: undo the start
            if not isinstance(started, ev.Event):
                await self._stop_job(started)
            starting.cancel()
            raise
        if isinstance(started, ev.Event):  # it did not start: this is the final report
            await starting.send()
            await self._finish(started)
            return
        job = started
        try:
            running_at = await self._report_running(job.start_phases, starting, pid=job.pid)
        except PermanentBusError:  # the log refuses this host's reports: undo the start
            await self._stop_job(job)
            raise
        await self._supervise(job, running_at, timeout_s)

    async def _start(self, spec: LaunchSpec | LaunchError) -> RunningJob | Outcome:
        """The started part, or the final report if it did not start (stopped first,
        or the start failed)."""
        if self._stop.is_set():
            return self._event(ev.JobStopConfirmed, exit_code=None)
        try:
            if isinstance(spec, LaunchError):
                raise spec
            job = await self._runtime.launch(spec, self.record)
        except LaunchError as err:
            self._log("could not start: %s", err.reason)
            return self._failed(err.reason, err.failure_class)
        except (OSError, RuntimeFailure) as err:
            self._log("could not start: %s", err)
            reason = f"InfrastructureError: {err}"
            return self._failed(reason, FailureClass.INFRASTRUCTURE_ERROR)
        self._log("started (pid %s)", job.pid)
        return job

    async def adopt(self, timeout_s: int | None, running_at: float | None) -> None:
        """After an agent restart: find the part again and see it through."""
        if self.record.outcome is not None:
            self._log("re-appending the final report saved before the restart")
            await self._reporter.report(self.record.outcome)
            await self._runtime.forget(self.record)
            return
        try:
            job = await self._runtime.adopt(self.record)
        except RuntimeFailure as err:
            self._log("cannot look for the job: %s", err)
            job = None
        if job is None:
            self._log("lost: not found after the restart")
            await self._finish(self._failed(LOST_REASON, FailureClass.INFRASTRUCTURE_ERROR))
            return
        self._log("re-adopted after a restart")
        if running_at is None:
            running_at = self.record.running_at
        if running_at is None:  # the agent died between the start and its report
            await self._reporter.report(self._event(ev.JobStarting))
            running_at = await self._report_running()
        await self._supervise(job, running_at, timeout_s)

    # ---- supervision -----------------------------------------------------------
    async def _supervise(self, job: RunningJob, running_at: float, timeout_s: int | None) -> None:
        mirror = self._mirror()
        try:
            await self._watch(job, running_at, timeout_s, mirror)
        finally:
            if mirror is not None:
                mirror.cancel()

    async def _watch(
        self,
        job: RunningJob,
        running_at: float,
        timeout_s: int | None,
        mirror: asyncio.Task[None] | None,
    ) -> None:
        exited = asyncio.create_task(job.wait(), name=f"wait {self.key}")
        stop_asked = asyncio.create_task(self._stop.wait())
        remaining = None if timeout_s is None else running_at + timeout_s - self._clock()
        try:
            await asyncio.wait(
                {exited, stop_asked},
                timeout=None if remaining is None else max(0.0, remaining),
                return_when=asyncio.FIRST_COMPLETED,
            )
            stop_asked.cancel()
            if exited.done():
                outcome = await self._ended(job, exited, stopped=self._stop.is_set())
            elif self._stop.is_set():
                await self._stop_job(job)
                outcome = await self._ended(job, exited, stopped=True)
            else:
                self._log("timed out after %ss: stopping", timeout_s)
                await self._stop_job(job)
                outcome = await self._timed_out(job, exited)
        except BaseException:
            exited.cancel()
            stop_asked.cancel()
            raise
        if mirror is not None:
            mirror.cancel()
            await self._flush_checkpoints()
        outcome = await self._collect(outcome)
        await self._finish(outcome)
        self.cleanup = asyncio.get_running_loop().create_future()
        try:
            await job.remove()
        except RuntimeFailure as err:
            self._log("could not clean up: %s", err)
        finally:
            self.cleanup.set_result(None)

    async def _stop_job(self, job: RunningJob) -> None:
        try:
            await job.stop(self._grace_s)
        except RuntimeFailure as err:  # the wait below says whether it ended anyway
            self._log("could not stop: %s", err)

    async def _ended(
        self, job: RunningJob, exited: asyncio.Task[ExitStatus], *, stopped: bool
    ) -> Outcome:
        try:
            status = await exited
        except RuntimeFailure as err:
            if stopped:
                return self._event(ev.JobStopConfirmed, exit_code=None)
            return self._failed(f"InfrastructureError: {err}", FailureClass.INFRASTRUCTURE_ERROR)
        self._log("exited %d", status.exit_code)
        if stopped:
            return self._event(ev.JobStopConfirmed, exit_code=status.exit_code)
        if status.infrastructure_error is not None:
            reason = f"InfrastructureError: {status.infrastructure_error}"
            return self._failed(reason, FailureClass.INFRASTRUCTURE_ERROR, status.exit_code)
        if status.start_error is not None:
            return self._failed(
                f"ClientError: {status.start_error}",
                FailureClass.CLIENT_ERROR,
                status.exit_code,
                await job.log_tail(),
            )
        if status.exit_code == 0:
            return self._event(ev.JobSucceeded, exit_code=0)
        return self._failed(
            f"AlgorithmError: exit code {status.exit_code}",
            FailureClass.ALGORITHM_ERROR,
            status.exit_code,
            await job.log_tail(),
        )

    async def _timed_out(self, job: RunningJob, exited: asyncio.Task[ExitStatus]) -> Outcome:
        try:
            code: int | None = (await exited).exit_code
        except RuntimeFailure:
            code = None
        tail = await job.log_tail()
        return self._failed(TIMEOUT_REASON, FailureClass.ALGORITHM_ERROR, code, tail)

    def _checkpoint_sync(self) -> CheckpointSync | None:
        outputs = self.record.outputs
        if outputs is None or outputs.checkpoints is None or not outputs.uploads:
            return None
        access = self._access_for(outputs.role_arn)
        if access is None:
            return None
        if self._sync is None:
            self._sync = CheckpointSync(outputs.checkpoints, access, self._clock)
        return self._sync

    def _mirror(self) -> asyncio.Task[None] | None:
        """Mirror the job's checkpoints while it runs (None: it keeps none)."""
        sync = self._checkpoint_sync()
        if sync is None:
            return None
        return asyncio.create_task(self._mirror_loop(sync), name=f"checkpoints {self.key}")

    async def _mirror_loop(self, sync: CheckpointSync) -> None:
        delay = CHECKPOINT_SCAN_S
        while True:
            await asyncio.sleep(delay)
            try:
                done = await asyncio.to_thread(sync.sync)
            except (StoreClientError, StoreUnavailable, OSError) as err:
                delay = min(delay * 2, CHECKPOINT_BACKOFF_MAX_S)  # retried, not reported
                self._log("checkpoint upload failed (next try in %.0fs): %s", delay, err)
                continue
            delay = CHECKPOINT_SCAN_S
            if done is not None:
                await self._report_checkpoint(done)

    async def _flush_checkpoints(self) -> None:
        """The job has ended: send what it wrote last, before its end is reported."""
        sync = self._checkpoint_sync()
        if sync is None:
            return
        limit = max(self._grace_s, CHECKPOINT_FLUSH_MIN_S)
        try:
            done = await asyncio.wait_for(asyncio.to_thread(sync.sync, flush=True), limit)
        except (StoreClientError, StoreUnavailable, OSError, TimeoutError) as err:
            self._log("final checkpoint upload failed: %s", err)
            return
        if done is not None:
            await self._report_checkpoint(done)

    async def _report_checkpoint(self, done: Round) -> None:
        self._log("checkpoint uploaded: %d bytes, %d files", done.bytes, done.files)
        if self._checkpointed is not None:
            try:
                await self._checkpointed(self.record, done)
            except Exception as err:  # the next round reports again
                self._log("checkpoint report failed: %s", err)

    async def _collect(self, outcome: Outcome) -> Outcome:
        """The training job's outputs: its failure file becomes the reason of an
        algorithm error, and its model and output data go to S3 however it ended. A
        success whose model cannot be made durable is reported as a failure (the
        client's for a refused upload, the host's for an unreachable store)."""
        outputs = self.record.outputs
        if outputs is None:
            return outcome
        if (
            isinstance(outcome, ev.JobFailed)
            and outcome.failure_class is FailureClass.ALGORITHM_ERROR
            and outcome.reason != TIMEOUT_REASON
        ):
            written = await asyncio.to_thread(failure_reason, outputs)
            if written:
                outcome = msgspec.structs.replace(outcome, reason=f"AlgorithmError: {written}")
        if not outputs.output_path or not outputs.uploads:
            return outcome
        succeeded = isinstance(outcome, ev.JobSucceeded)
        try:
            collected = await asyncio.to_thread(
                collect, outputs, self._access_for(outputs.role_arn)
            )
        except (StoreClientError, StoreUnavailable, OSError) as err:
            self._log("could not upload the outputs to %s: %s", outputs.output_path, err)
            if not succeeded:
                return outcome
            if isinstance(err, StoreClientError):
                reason = f"ClientError: uploading the model to {outputs.model_uri} failed: {err}"
                return self._failed(reason, FailureClass.CLIENT_ERROR, 0)
            reason = f"InfrastructureError: uploading the model failed: {err}"
            return self._failed(reason, FailureClass.INFRASTRUCTURE_ERROR, 0)
        if collected.model_artifacts:
            self._log("model uploaded to %s", collected.model_artifacts)
            outcome = msgspec.structs.replace(outcome, model_artifacts=collected.model_artifacts)
        return outcome

    # ---- reports and the record -------------------------------------------------
    async def _report_running(
        self,
        start_phases: ev.StartPhases | None = None,
        starting: StartingReport | None = None,
        **record: object,
    ) -> float:
        """Note where the job runs (`record`: its pid) and when, and report; returns
        once the report, and `starting` (JobStarting's, or with it in one message),
        are acked.

        The note is written unflushed: it guards nothing the report says. A restart
        that finds no pid in the record finds the part by its attempt
        (`JobRuntime.adopt`), and one that finds no `running_at` reports JobRunning
        again (same msg id; the fold takes a repeated JobRunning as a no-op).
        """
        event = self._event(ev.JobRunning, start_phases=start_phases)
        self.record = msgspec.structs.replace(self.record, running_at=event.at, **record)
        self._store.note(self.record)
        together = None if starting is None else starting.take()
        if together is not None:
            await self._reporter.report_together([together, event], self.trace)
        else:
            await asyncio.gather(
                self._reporter.report(event, self.trace),
                *([] if starting is None else [starting.send()]),
            )
        if self._on_running is not None:
            self._on_running(event)
        if self._spans:  # started: the start span ends, the run span begins
            self._spans.pop().end()
            self._open_span("node_agent.run", self.trace)
        return event.at

    async def _finish(self, outcome: Outcome) -> None:
        """Report the outcome while it is saved (each waits for the other to end).

        The report does not wait for the save's flush: what the save guards is a report
        that does not reach the log. A restart that finds the outcome saved appends it
        again; one that does not settles the ended part from its exit file, or, after a
        host crash took the unflushed exit file too, reports it lost. Either report
        changes nothing once the log holds the attempt's end (the fold ignores reports
        of an ended attempt)."""
        saving = asyncio.ensure_future(self._save(outcome=outcome))
        try:
            await self._reporter.report(outcome, self.trace)
        finally:
            await saving
        self._log("reported %s", type(outcome).__name__)

    def _open_span(self, name: str, parent: str | None) -> None:
        if parent is None:
            return
        span = traces.start(
            SERVICE,
            name,
            parent,
            attributes={"qm.job_id": self.record.job_id, "qm.host": self.record.host},
        )
        self._spans.append(span)
        self.trace = span.traceparent

    async def _save(self, **changes: object) -> None:
        """Change the record and write it durably."""
        self.record = msgspec.structs.replace(self.record, **changes)
        await self._store.persist(self.record)

    def _event(self, kind: type[E], **fields: object) -> E:
        return kind(  # type: ignore[call-arg]
            at=self._clock(),
            job_id=self.record.job_id,
            attempt=self.record.attempt,
            host=self.record.host,
            **fields,
        )

    def _failed(
        self,
        reason: str,
        failure_class: FailureClass,
        exit_code: int | None = None,
        log_tail: str = "",
    ) -> ev.JobFailed:
        return self._event(
            ev.JobFailed,
            reason=reason,
            failure_class=failure_class,
            exit_code=exit_code,
            log_tail=log_tail,
        )

    def _log(self, message: str, *args: object) -> None:
        log.info(
            "job_id=%s attempt=%d host=%s " + message,
            self.record.job_id,
            self.record.attempt,
            self.record.host,
            *args,
            extra={
                "job_id": self.record.job_id,
                "host": self.record.host,
                "trace_id": self._trace_id,
            },
        )

    @property
    def _trace_id(self) -> str | None:
        return traces.trace_id_of(self.trace)
