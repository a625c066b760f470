"""Idempotence keys: job ids, request fingerprints and log msg ids.

A client token makes the job id deterministic, `uuid5(NAMESPACE, "<queue>/<token>")`,
so every retry of a submission names the same job and appends the same msg id.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb

NAMESPACE = uuid.UUID("6f1d8c36-5b0e-4c55-9a43-6a7f0b8f2a51")


def job_id_for_token(queue: str, client_token: str) -> str:
    return uuid.uuid5(NAMESPACE, f"{queue}/{client_token}").hex


def new_job_id() -> str:
    return uuid.uuid4().hex


def new_msg_id() -> str:
    """A msg id for a request that has no natural key: dedupes only the append's retries."""
    return f"req-{uuid.uuid4().hex}"


def submit_msg_id(job_ids: Iterable[str]) -> str:
    """One envelope of submissions: the same jobs always make the same msg id."""
    digest = hashlib.sha256("/".join(sorted(job_ids)).encode()).hexdigest()
    return f"submit-{digest[:40]}"


def request_hash(request: pb.SubmitServiceJobRequest, queue: str) -> str:
    """Fingerprint of a submission, blind to how the queue was named and JSON spacing."""
    canonical = pb.SubmitServiceJobRequest()
    canonical.CopyFrom(request)
    canonical.job_queue = queue
    try:
        payload = json.loads(request.service_request_payload)
        canonical.service_request_payload = json.dumps(
            payload, sort_keys=True, separators=(",", ":")
        )
    except (ValueError, RecursionError):
        pass  # validated elsewhere; an unparsable payload hashes as given
    data = canonical.SerializeToString(deterministic=True)
    return hashlib.sha256(data).hexdigest()
