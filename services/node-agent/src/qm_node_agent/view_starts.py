"""Start metrics from host views: the JobRunning a view shows, once per attempt.

`StartObserver` times starts from the JobRunning reports it folds; an agent on
the host feed folds no reports, only views. A view's job that is RUNNING with
this host in its attempt stands for that report (its time: the job's
`running_at`; its phases: the attempt's), and is passed on once per attempt.
For a job over several hosts these are the attempt's first report, not
necessarily this host's.
"""

from __future__ import annotations

from collections.abc import Callable

from quartermaster import events as ev
from quartermaster.core import JobStatus, State
from quartermaster.metrics.attempts import StartObserver


class ViewStarts:
    def __init__(self, host_id: str, observer: StartObserver, state: Callable[[], State]) -> None:
        self._host = host_id
        self._observer = observer
        self._state = state
        self._seen: set[tuple[str, int]] = set()

    def __call__(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        state = self._state()
        running: list[ev.AnyEvent] = []
        for job in state.jobs.values():
            key = (job.job_id, job.attempt_no)
            if job.status is not JobStatus.RUNNING or job.running_at is None or key in self._seen:
                continue
            if self._host not in job.hosts or not job.attempts:
                continue
            self._seen.add(key)
            phases = job.attempts[-1].start_phases
            running.append(
                ev.JobRunning(
                    at=job.running_at,
                    job_id=job.job_id,
                    attempt=job.attempt_no,
                    host=self._host,
                    start_phases=phases,
                )
            )
        if running:
            self._observer(seq, subject, running)
        live = {(job.job_id, job.attempt_no) for job in state.jobs.values()}
        self._seen &= live
