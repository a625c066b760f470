"""`qm.v1.Nodes`: list hosts, drain one and undrain it."""

from __future__ import annotations

from typing import Any

from qm_admission import queries, validation
from qm_admission.paging import page
from qm_admission.servicers.base import Backends, write
from qm_admission.translate import node_summary, parse
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc


class Nodes(rpc.NodesServicer):
    def __init__(self, backends: Backends) -> None:
        self._b = backends

    async def ListNodes(self, request: pb.ListNodesRequest, context: Any) -> pb.ListNodesResponse:
        state = await self._b.consistency.folded(context)
        query = queries.list_nodes(request, state)
        await self._b.consistency.projected(context)
        docs = await self._b.read_model.list_hosts(query.service_environment, query.state)
        nodes = [self._last_beat(parse(d, pb.NodeSummary())) for d in docs]
        items, token = page(nodes, request.max_results, request.next_token)
        return pb.ListNodesResponse(nodes=items, next_token=token)

    async def DrainNode(self, request: pb.DrainNodeRequest, context: Any) -> pb.DrainNodeResponse:
        written = await write(
            self._b, context, lambda s, now: validation.drain_node(request, s, at=now)
        )
        await self._b.follower.wait_for(written.seq, self._b.settings.read_timeout_seconds)
        state = self._b.follower.state
        node = node_summary(state, state.hosts[request.host_id])
        return pb.DrainNodeResponse(node=self._last_beat(node))

    async def UndrainNode(
        self, request: pb.UndrainNodeRequest, context: Any
    ) -> pb.UndrainNodeResponse:
        written = await write(
            self._b, context, lambda s, now: validation.undrain_node(request, s, at=now)
        )
        await self._b.follower.wait_for(written.seq, self._b.settings.read_timeout_seconds)
        state = self._b.follower.state
        node = node_summary(state, state.hosts[request.host_id])
        return pb.UndrainNodeResponse(node=self._last_beat(node))

    def _last_beat(self, node: pb.NodeSummary) -> pb.NodeSummary:
        """The newer of the log's sign of life (registration) and the host's newest
        heartbeat in the liveness bucket (heartbeats are not in the log)."""
        beat = None if self._b.liveness is None else self._b.liveness.last_beat(node.host_id)
        if beat is not None:
            node.last_heartbeat_at = max(node.last_heartbeat_at, round(beat * 1000))
        return node
