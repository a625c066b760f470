"""Drives node agents the way the rest of the system does: by appending events to the log.

`Cluster` appends configuration, job requests and scheduler decisions as real
envelopes on their real subjects, folds the log with its own follower, and
collects what the agents report on `<prefix>.reports.<host>`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qm_node_agent import NodeAgent, NodeSettings, RuntimeKind
from quartermaster import events as ev
from quartermaster.bus import JetStreamLog
from quartermaster.core import Job
from quartermaster.eventlog import LogFollower, encode_batch, subjects
from quartermaster.eventlog.host_relay import HostRelay

UNIT = "ml.g5.xlarge"
QUEUE = "q"
SHARE = "QS1"
JOB_RUNNER_IMAGE = "quartermaster/job-runner:test"


def payload(
    script: str | None = None,
    *,
    entrypoint: list[str] | None = None,
    image: str = JOB_RUNNER_IMAGE,
    env: dict[str, str] | None = None,
) -> str:
    """A CreateTrainingJob request; `script` runs as `sh -c script`."""
    algorithm: dict[str, Any] = {"TrainingImage": image, "TrainingInputMode": "File"}
    if entrypoint is not None:
        algorithm["ContainerEntrypoint"] = entrypoint
    elif script is not None:
        algorithm["ContainerEntrypoint"] = ["sh", "-c"]
        algorithm["ContainerArguments"] = [script]
    return json.dumps(
        {
            "TrainingJobName": "test",
            "AlgorithmSpecification": algorithm,
            "RoleArn": "arn:aws:iam::123456789012:role/test",
            "Environment": env or {},
            "ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1, "VolumeSizeInGB": 10},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        }
    )


class Cluster:
    def __init__(self, event_log: JetStreamLog, tmp: Path) -> None:
        self.log = event_log
        self.tmp = tmp
        self.follower = LogFollower(event_log)
        self.relay = HostRelay(self.follower)  # the scheduler's part: each host's view
        self.reports: list[tuple[str, ev.AnyEvent]] = []  # (subject, event)
        self.report_messages: list[list[type[ev.Event]]] = []  # event types of each report
        self._reports_prefix = f"{event_log.prefix}.reports."

    # ---- setup ---------------------------------------------------------------------
    async def start(self) -> None:
        self.follower.listen(self._collect)
        await self.follower.start()
        await self.relay.start()
        limits = (ev.CapacityLimit(UNIT, 4),)
        await self.request(
            ev.ServiceEnvironmentCreated(at=time.time(), name="env", capacity_limits=limits),
            ev.SchedulingPolicyCreated(at=time.time(), name="fifo"),
            ev.JobQueueCreated(
                at=time.time(), name=QUEUE, service_environment="env", scheduling_policy="fifo"
            ),
            ev.QuotaShareCreated(
                at=time.time(),
                job_queue=QUEUE,
                name=SHARE,
                capacity_limits=limits,
                strategy=ev.SharingStrategy.LEND_AND_BORROW,
            ),
        )

    async def close(self) -> None:
        await self.relay.stop()
        await self.follower.stop()

    def _collect(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        if subject.startswith(self._reports_prefix):
            self.reports.extend((subject, event) for event in events)
            self.report_messages.append([type(event) for event in events])

    def process_env(self, host_id: str, nats_url: str, **extra: str) -> dict[str, str]:
        """The environment of a `python -m qm_node_agent` process on this cluster's log."""
        return {
            "PATH": os.environ["PATH"],
            "QM_NODE_HOST_ID": host_id,
            "QM_NODE_INSTANCE_TYPE": "ml.g5.xlarge",
            "QM_NODE_DATA_DIR": str(self.tmp / "data"),
            "QM_NODE_GPU_COUNT": "0",
            "QM_NODE_NATS_URL": nats_url,
            "QM_NODE_STREAM": self.log.stream,
            "QM_NODE_SUBJECT_PREFIX": self.log.prefix,
            **extra,
        }

    def settings(
        self, host_id: str = "h1", runtime: RuntimeKind = RuntimeKind.PROCESS, **changes: Any
    ) -> NodeSettings:
        fields: dict[str, Any] = {
            "host_id": host_id,
            "instance_type": UNIT,
            "data_dir": self.tmp / f"agent-{host_id}",
            "gpu_count": 0,
            "runtime": runtime,
            "stream": self.log.stream,
            "subject_prefix": self.log.prefix,
            "heartbeat_seconds": 0.5,
            "stop_grace_seconds": 2.0,
            "address": "127.0.0.1",
        }
        fields.update(changes)
        return NodeSettings(**fields)

    def agent(self, settings: NodeSettings) -> NodeAgent:
        return NodeAgent(settings, self.log)

    # ---- appending -----------------------------------------------------------------
    async def append(self, subject: str, *events: ev.Event) -> int:
        seq = await self.log.append(subject, encode_batch(list(events)))
        await self.follower.wait_for(seq)
        return seq

    async def request(self, *events: ev.Event) -> int:
        return await self.append(subjects.requests(self.log.prefix), *events)

    async def decide(self, *events: ev.Event) -> int:
        return await self.append(subjects.decisions(QUEUE, self.log.prefix), *events)

    async def submit(
        self,
        job_id: str,
        request: str,
        *,
        keep_alive: int = 0,
        timeout: int | None = None,
    ) -> None:
        await self.request(
            ev.JobSubmitted(
                at=time.time(),
                job_id=job_id,
                job_name=job_id,
                job_queue=QUEUE,
                quota_share=SHARE,
                instance_type=UNIT,
                keep_alive_seconds=keep_alive,
                attempt_duration_seconds=timeout,
                warm_pool_key=ev.WarmPoolKey(instance_type=UNIT),
                payload=request,
            )
        )

    async def dispatch(
        self, job_id: str, hosts: tuple[str, ...] = ("h1",), warm_pool: str | None = None
    ) -> None:
        attempt = self.job(job_id).attempt_no + 1
        await self.decide(
            ev.JobDispatched(
                at=time.time(), job_id=job_id, attempt=attempt, hosts=hosts, warm_pool=warm_pool
            )
        )
        assert self.job(job_id).attempt_no == attempt, f"{job_id} was not dispatched"

    async def run(self, job_id: str, request: str, **submit: Any) -> None:
        await self.submit(job_id, request, **submit)
        await self.dispatch(job_id)

    async def preempt(self, job_id: str) -> None:
        job = self.job(job_id)
        await self.decide(
            ev.JobPreemptionRequested(
                at=time.time(),
                job_id=job_id,
                attempt=job.attempt_no,
                reason="Preempted by a job of a share below its limit",
                for_job="other",
            )
        )

    async def terminate(self, job_id: str, reason: str = "cancelled by the user") -> None:
        await self.request(ev.JobTerminationRequested(at=time.time(), job_id=job_id, reason=reason))

    # ---- reading -------------------------------------------------------------------
    def job(self, job_id: str) -> Job:
        return self.follower.state.jobs[job_id]

    def reported(self, job_id: str, kind: type[ev.Event] | None = None) -> list[Any]:
        return [
            event
            for _, event in self.reports
            if getattr(event, "job_id", None) == job_id
            and (kind is None or isinstance(event, kind))
        ]

    async def until(self, what: str, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
            await asyncio.sleep(0.02)

    async def until_status(self, job_id: str, *statuses: str, timeout: float = 15.0) -> Job:
        await self.until(
            f"{job_id} in {statuses}",
            lambda: job_id in self.follower.state.jobs and self.job(job_id).status in statuses,
            timeout,
        )
        return self.job(job_id)

    async def until_reported(self, job_id: str, kind: type[ev.Event], timeout: float = 15.0) -> Any:
        await self.until(
            f"{kind.__name__} for {job_id}", lambda: bool(self.reported(job_id, kind)), timeout
        )
        return self.reported(job_id, kind)[0]

    async def until_host(self, host_id: str = "h1") -> None:
        await self.until(
            f"{host_id} registered", lambda: host_id in self.follower.state.hosts, timeout=10
        )


async def wait_for_file(path: Path, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {path}")
        await asyncio.sleep(0.02)
    return path.read_text()


def process_alive(pid: int) -> bool:
    """`pid` runs: it exists and is not a zombie (gone, only not yet reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def engine_has(kind: str, name: str) -> bool:
    """Whether the docker engine has the `kind` (container, volume) named `name`."""
    found = subprocess.run(["docker", kind, "inspect", name], capture_output=True)
    return found.returncode == 0
