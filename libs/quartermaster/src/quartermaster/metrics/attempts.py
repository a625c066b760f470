"""How long the start of an attempt took on a host, per phase."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Histogram

from quartermaster import events as ev
from quartermaster.core.state import State
from quartermaster.events import AnyEvent

START_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class NodeMetrics:
    """Shared by every agent of a process; `host` tells them apart."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.start_phase = Histogram(
            "quartermaster_attempt_start_phase_seconds",
            "Time an attempt's start took on its host, per phase (dispatch_to_running: "
            "log time from the dispatch to the host's JobRunning; pull, volume, staging, "
            "container: measured by the docker runtime, 0 when a warm pool kept it)",
            ["host", "phase"],
            buckets=START_BUCKETS,
            registry=CollectorRegistry() if registry is None else registry,
        )

    def observe(self, host: str, phase: str, seconds: float) -> None:
        self.start_phase.labels(host, phase).observe(max(0.0, seconds))


class StartObserver:
    """A log listener that times this host's starts from the RUNNING reports it folds.

    `dispatch_to_running`: log time from the dispatch decision to this host's
    JobRunning; `pull`, `volume`, `staging`, `container`: the phases the report
    carries when the runtime measured them (docker). Registered after the fold's
    own listener, so the attempt's dispatch is in the state.
    """

    def __init__(self, host: str, metrics: NodeMetrics, state: Callable[[], State]) -> None:
        self._host = host
        self._metrics = metrics
        self._state = state

    def __call__(self, seq: int, subject: str, events: list[AnyEvent]) -> None:
        for event in events:
            if isinstance(event, ev.JobRunning) and event.host == self._host:
                self._observe(event)

    def _observe(self, event: ev.JobRunning) -> None:
        job = self._state().jobs.get(event.job_id)
        if job is not None and job.attempts and job.attempt_no == event.attempt:
            since = event.at - job.attempts[-1].dispatched_at
            self._metrics.observe(self._host, "dispatch_to_running", since)
        phases = event.start_phases
        if phases is None:
            return
        for phase, seconds in (
            ("pull", phases.pull_s),
            ("volume", phases.volume_s),
            ("staging", phases.staging_s),
            ("container", phases.container_s),
        ):
            self._metrics.observe(self._host, phase, seconds)
