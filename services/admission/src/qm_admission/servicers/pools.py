"""`qm.v1.WarmPools`: list pools and change a job's keep-alive."""

from __future__ import annotations

from typing import Any

from qm_admission import access, queries, validation
from qm_admission.servicers.base import Backends, write
from qm_admission.servicers.jobs import job_scope
from qm_admission.translate import parse, warm_pool_summary
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.core import State
from quartermaster.events import Event


class WarmPools(rpc.WarmPoolsServicer):
    def __init__(self, backends: Backends) -> None:
        self._b = backends

    async def ListWarmPools(
        self, request: pb.ListWarmPoolsRequest, context: Any
    ) -> pb.ListWarmPoolsResponse:
        state = await self._b.consistency.folded(context)
        query = queries.list_pools(request, state)
        await self._b.consistency.projected(context)
        docs, token = await self._b.read_model.list_pools(
            status=query.status,
            job_queue=query.job_queue,
            max_results=query.max_results,
            next_token=query.next_token,
        )
        return pb.ListWarmPoolsResponse(
            warm_pool_summaries=[parse(d, pb.WarmPoolSummary()) for d in docs],
            next_token=token or "",
        )

    async def UpdateWarmPool(
        self, request: pb.UpdateWarmPoolRequest, context: Any
    ) -> pb.UpdateWarmPoolResponse:
        limit = self._b.settings.max_keep_alive_seconds

        def plan(s: State, now: float) -> list[Event]:
            job_scope(s, access.P.POOLS_UPDATE, request.job_id)
            return validation.update_warm_pool(request, s, at=now, max_keep_alive_seconds=limit)

        written = await write(self._b, context, plan)
        await self._b.follower.wait_for(written.seq, self._b.settings.read_timeout_seconds)
        state = self._b.follower.state
        return pb.UpdateWarmPoolResponse(warm_pool=warm_pool_summary(state, request.job_id))
