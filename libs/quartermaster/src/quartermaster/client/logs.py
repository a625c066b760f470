"""An attempt's output, streamed by `GetServiceJobLogs` from the node agent of its host."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.client.connection import Quartermaster, QuartermasterError


def job_logs(
    client: Quartermaster,
    job_id: str,
    *,
    attempt: int = 0,
    host_id: str = "",
    follow: bool = False,
    offset: int = 0,
    timeout: float | None = None,
) -> Iterator[pb.LogChunk]:
    """Chunks of the attempt's stdout and stderr (attempt 0: the latest) in order; with
    `follow`, new output as it is written, until the attempt ends."""
    request = pb.GetServiceJobLogsRequest(
        job_id=job_id, attempt=attempt, host_id=host_id, follow=follow, offset=offset
    )
    if timeout is None and not follow:
        timeout = client.timeout
    stream = client.jobs.GetServiceJobLogs(
        request, timeout=timeout, metadata=(("x-qm-min-seq", str(client.seq)),)
    )
    try:
        yield from stream
    except grpc.RpcError as err:
        raise QuartermasterError(err.code(), err.details() or "") from err
    finally:
        stream.cancel()
