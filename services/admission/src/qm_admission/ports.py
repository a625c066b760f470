"""What admission needs from the read side (`quartermaster.store`), as structural types.

`quartermaster.store.ReadModel` satisfies `ReadModelPort`; `Projector` (in-process
projection) and `ReadModel` itself (waits on the stored position, for a projection
run elsewhere) both satisfy `PositionPort`. Documents use the proto field names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

Doc = dict[str, Any]
Page = tuple[list[Doc], str | None]


class ReadModelPort(Protocol):
    async def describe_job(self, job_id: str) -> Doc | None: ...

    async def list_jobs(
        self,
        job_queue: str,
        quota_share: str | None = None,
        status: str | None = None,
        job_name: str | None = None,
        before_created_at: int | None = None,
        after_created_at: int | None = None,
        max_results: int | None = ...,
        next_token: str | None = None,
        quota_shares: Sequence[str] | None = None,
    ) -> Page: ...

    async def list_pools(
        self,
        status: str | None = None,
        job_queue: str | None = None,
        max_results: int | None = ...,
        next_token: str | None = None,
    ) -> Page: ...

    async def list_hosts(
        self, service_environment: str | None = None, state: str | None = None
    ) -> list[Doc]: ...

    async def describe_share(self, job_queue: str, name: str) -> Doc | None: ...

    async def list_shares(
        self, job_queue: str, max_results: int | None = ..., next_token: str | None = None
    ) -> Page: ...

    async def describe_queues(self, names: Sequence[str] | None = None) -> list[Doc]: ...

    async def describe_environments(self, names: Sequence[str] | None = None) -> list[Doc]: ...

    async def describe_policies(self, names: Sequence[str] | None = None) -> list[Doc]: ...

    async def list_policies(
        self, max_results: int | None = ..., next_token: str | None = None
    ) -> Page: ...

    async def queue_snapshot(self, job_queue: str, max_results: int | None = ...) -> Doc | None: ...

    async def claim_client_token(
        self, token: str, job_queue: str, request_hash: str, job_id: str
    ) -> tuple[str, str]: ...


class PositionPort(Protocol):
    async def wait_for(self, seq: int, timeout: float | None = ...) -> object:
        """Return once the read model reflects log position `seq`; TimeoutError otherwise."""
        ...
