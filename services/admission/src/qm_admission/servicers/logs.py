"""The ServiceJobs service with `GetServiceJobLogs` (and, inherited, ExplainServiceJob)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from qm_admission.joblogs import AgentLogs, stream_logs
from qm_admission.servicers.base import Backends
from qm_admission.servicers.explain import ExplainingServiceJobs
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb


class LoggingServiceJobs(ExplainingServiceJobs):
    def __init__(self, backends: Backends, agent_logs: AgentLogs) -> None:
        super().__init__(backends)
        self._agent_logs = agent_logs

    async def GetServiceJobLogs(
        self, request: pb.GetServiceJobLogsRequest, context: Any
    ) -> AsyncIterator[pb.LogChunk]:
        state = await self._backends.consistency.folded(context)
        async for chunk in stream_logs(self._agent_logs, self._backends.follower, state, request):
            yield chunk
