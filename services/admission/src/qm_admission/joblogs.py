"""`GetServiceJobLogs`: an attempt's output, asked of its host's node agent over NATS.

Admission holds no job output: each node agent keeps its attempts' logs
(`qm_node_agent.joblogs`) and answers ranges of them on `<prefix>_logs.<host>`.
The stream asks range after range from the requested offset; with `follow` it
waits for an attempt that has not started yet and polls for new output until the
agent says the attempt ended and everything was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import nats.errors

from qm_admission import access
from qm_admission.errors import TransientAdmissionError, failed_precondition, invalid, not_found
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.bus import joblogs as wire
from quartermaster.core import State
from quartermaster.core.model import TERMINAL_STATUSES, Attempt, Job
from quartermaster.eventlog import LogFollower

POLL_S = 0.5  # how often a follow asks again when there was nothing new


class AgentUnreachable(TransientAdmissionError):
    """The host's node agent did not answer (stopped, restarting, or cut off)."""


class AgentLogs:
    """Asks a host's node agent for a range of an attempt's log (request/reply)."""

    def __init__(self, nc: Any, prefix: str, timeout_s: float = 5.0) -> None:
        self._nc = nc
        self._prefix = prefix
        self._timeout_s = timeout_s

    async def fetch(self, host: str, request: wire.LogRequest) -> wire.LogReply:
        subject = wire.logs_subject(self._prefix, host)
        try:
            msg = await self._nc.request(subject, wire.encode(request), timeout=self._timeout_s)
        except nats.errors.NoRespondersError as err:
            raise AgentUnreachable(f"the node agent of host {host} is not running") from err
        except (nats.errors.TimeoutError, nats.errors.ConnectionClosedError) as err:
            raise AgentUnreachable(f"the node agent of host {host} did not answer") from err
        return wire.decode_reply(msg.data)


async def stream_logs(
    agents: AgentLogs, follower: LogFollower, state: State, request: pb.GetServiceJobLogsRequest
) -> AsyncIterator[pb.LogChunk]:
    """The chunks of one attempt's output on one host (`state`: caught up to the call)."""
    if not request.job_id:
        raise invalid("job_id", "is required")
    if request.attempt < 0:
        raise invalid("attempt", "must be 0 (the latest) or an attempt number (1, 2, ...)")
    if request.offset < 0:
        raise invalid("offset", "must not be negative")
    job = state.jobs.get(request.job_id)
    if job is None:
        raise not_found("job_id", f"job {request.job_id!r} does not exist")
    access.require_share(access.P.JOBS_LOGS, job.queue, job.share)
    attempt = await _attempt_to_read(follower, request)
    host = request.host_id or attempt.hosts[0]
    if host not in attempt.hosts:
        raise invalid(
            "host_id", f"attempt {attempt.number} ran on {', '.join(attempt.hosts)}, not {host}"
        )
    offset = request.offset
    while True:
        ask = wire.LogRequest(job_id=job.job_id, attempt=attempt.number, offset=offset)
        reply = await agents.fetch(host, ask)
        if not reply.found:
            if request.follow and _may_start(follower.state, job.job_id, attempt.number):
                await asyncio.sleep(POLL_S)  # dispatched; the agent has not launched it yet
                continue
            raise not_found(
                "attempt",
                f"host {host} keeps no log of attempt {attempt.number} of job {job.job_id} "
                "(never started there, or older than the node's log retention)",
            )
        if reply.data or reply.skipped_bytes:
            yield pb.LogChunk(
                job_id=job.job_id,
                attempt=attempt.number,
                host_id=host,
                offset=reply.offset,
                data=reply.data,
                skipped_bytes=reply.skipped_bytes,
            )
            offset = reply.offset + len(reply.data)
            continue
        if reply.complete or not request.follow:
            return
        await asyncio.sleep(POLL_S)


async def _attempt_to_read(follower: LogFollower, request: pb.GetServiceJobLogsRequest) -> Attempt:
    """The asked attempt; with follow and none yet (attempt 0), wait for the first."""
    while True:
        job = follower.state.jobs.get(request.job_id)
        if job is None:  # forgotten by a bounded state while we waited
            raise not_found("job_id", f"job {request.job_id!r} does not exist")
        if request.attempt:
            found = [a for a in job.attempts if a.number == request.attempt]
            if found:
                return found[0]
            if not (request.follow and job.status not in TERMINAL_STATUSES):
                raise not_found(
                    "attempt",
                    f"job {job.job_id} has no attempt {request.attempt} "
                    f"(it has {len(job.attempts)})",
                )
        elif job.attempts:
            return job.attempts[-1]
        elif not request.follow or job.status in TERMINAL_STATUSES:
            raise failed_precondition(
                "job_id", f"job {job.job_id} has not started an attempt ({job.status.value})"
            )
        await asyncio.sleep(POLL_S)


def _may_start(state: State, job_id: str, number: int) -> bool:
    job: Job | None = state.jobs.get(job_id)
    return job is not None and job.attempt_no == number and job.status not in TERMINAL_STATUSES
