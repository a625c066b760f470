"""Planning a submission of one or many jobs, with client-token idempotence.

Without a token a job gets a fresh uuid4 id. With one, its id is derived from
(queue, token), and the token is claimed durably in the read model *before* the
append, with a fingerprint of the request: the same token with the same request
answers the first job (appending it again if the log does not hold it yet, which
the msg id dedupes); with a different request it is rejected (ALREADY_EXISTS on
`client_token`). Valid jobs of one call go into one envelope; every item gets its
own result. `plan_group` plans the calls of several callers together (group commit,
see `group_commit.SubmitGroups`): each call is planned as its own caller, and its events
record that caller as their principal.
"""

from __future__ import annotations

from qm_admission import access, validation
from qm_admission.errors import RequestRejected, already_exists
from qm_admission.ports import ReadModelPort
from qm_admission.roles import RoleFile, known_roles
from qm_admission.tokens import job_id_for_token, new_job_id, request_hash, submit_msg_id
from qm_admission.translate import job_reply
from qm_admission.writer import Plan, signed
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.auth import Principal
from quartermaster.core import State
from quartermaster.events import Event

Outcome = pb.SubmitServiceJobResponse | RequestRejected

# Jobs of one call get created_at in request order (FIFO ties break on createdAt first).
_ORDER_STEP_SECONDS = 1e-6


class SubmissionPlanner:
    def __init__(
        self,
        read_model: ReadModelPort,
        max_keep_alive_seconds: int,
        *,
        require_command: bool = False,
        roles: RoleFile | None = None,
    ) -> None:
        self._read_model = read_model
        self._max_keep_alive_seconds = max_keep_alive_seconds
        self._require_command = require_command
        self._roles = roles

    async def plan(
        self, requests: list[pb.SubmitServiceJobRequest], state: State, now: float
    ) -> Plan[list[Outcome]]:
        """One caller's call (the caller of this task's context)."""
        grouped = await self.plan_group([(access.caller(), requests)], state, now)
        (outcomes,) = grouped.result
        return Plan(grouped.events, outcomes, grouped.msg_id, grouped.rejected_some)

    async def plan_group(
        self,
        calls: list[tuple[Principal, list[pb.SubmitServiceJobRequest]]],
        state: State,
        now: float,
    ) -> Plan[list[list[Outcome]]]:
        """Several callers' calls in one envelope; outcomes per call, in call order."""
        events: list[Event] = []
        results: list[list[Outcome]] = []
        in_batch: set[str] = set()
        index = 0
        for principal, requests in calls:
            as_caller = access.current.set(principal)
            try:
                outcomes: list[Outcome] = []
                for request in requests:
                    at = now + index * _ORDER_STEP_SECONDS
                    index += 1
                    added: list[Event] = []
                    try:
                        job_id, new = await self._one(request, state, at, in_batch, added)
                    except RequestRejected as rejected:
                        outcomes.append(rejected)
                        continue
                    events.extend(signed(added, principal.subject))
                    if new:
                        in_batch.add(job_id)
                    job = state.jobs.get(job_id)
                    outcomes.append(job_reply(job_id, job.job_name if job else request.job_name))
            finally:
                access.current.reset(as_caller)
            results.append(outcomes)
        return Plan(
            events,
            results,
            msg_id=submit_msg_id(in_batch) if in_batch else None,
            rejected_some=any(isinstance(o, RequestRejected) for r in results for o in r),
        )

    async def _one(
        self,
        request: pb.SubmitServiceJobRequest,
        state: State,
        at: float,
        in_batch: set[str],
        events: list[Event],
    ) -> tuple[str, bool]:
        """The job id a request names, and whether its `JobSubmitted` was added to `events`."""
        if not request.client_token:
            job_id = new_job_id()
            events.extend(self._validate(request, state, job_id, at))
            return job_id, True
        token = validation.check_client_token(request.client_token)
        queue = validation.queue_name(request, state)
        job_id = job_id_for_token(queue, token)
        known = job_id in state.jobs or job_id in in_batch
        submitted = [] if known else self._validate(request, state, job_id, at)
        digest = request_hash(request, queue)
        claimed_id, claimed_digest = await self._read_model.claim_client_token(
            token, queue, digest, job_id
        )
        if claimed_digest != digest:
            raise already_exists(
                "client_token",
                f"client token {token!r} was used for a different request"
                + _job_if_readable(state, claimed_id),
            )
        if claimed_id != job_id:  # a claim made under another id scheme: answer that job
            return claimed_id, False
        events.extend(submitted)
        return job_id, not known

    def _validate(
        self, request: pb.SubmitServiceJobRequest, state: State, job_id: str, at: float
    ) -> list[Event]:
        events = validation.submit_job(
            request,
            state,
            job_id=job_id,
            at=at,
            max_keep_alive_seconds=self._max_keep_alive_seconds,
            require_command=self._require_command,
            known_roles=known_roles(self._roles),
        )
        return events


def _job_if_readable(state: State, job_id: str) -> str:
    """` (job <id>)` when the caller may read that job: a member guessing another
    share's client token must not learn that share's job id."""
    job = state.jobs.get(job_id)
    if job is None or not access.caller().reads_share(job.queue, job.share):
        return ""
    return f" (job {job_id})"
