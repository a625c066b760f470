"""A connection to admission, with read-your-writes across calls.

Every write answers with the log position it reached (`x-qm-seq`); the client
sends the highest it has seen (`x-qm-min-seq`) with each read, so a describe
right after a submit sees the submit, whichever admission instance answers. It
asks for the position in the trailing metadata (`x-qm-seq-in: trailer`, which
spares the server a send of its own) and reads it from either, since a server
that does not know the key answers in the initial metadata.

The address is the argument, else `QM_ADDRESS`, else 127.0.0.1:50051 (`qm up`);
`default_client()` is the one client of a process that SDK-shaped objects built
without a `client=` share (like boto3's default session).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.client.credentials import find_credentials

R = TypeVar("R", bound=Message)

DEFAULT_ADDRESS = "127.0.0.1:50051"

STRATEGIES = {
    "RESERVE": pb.SHARING_STRATEGY_RESERVE,
    "LEND": pb.SHARING_STRATEGY_LEND,
    "LEND_AND_BORROW": pb.SHARING_STRATEGY_LEND_AND_BORROW,
}


class QuartermasterError(Exception):
    """A call failed; `code` is the gRPC status, `details` the message, `field` the request
    field at fault ("" when none), `status` the `google.rpc.Status` with typed details
    (BadRequest, PreconditionFailure, ErrorInfo, ...; None from an older server)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        field: str = "",
        status: status_pb2.Status | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.field = field
        self.status = status

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError) -> QuartermasterError:
        """The error of a failed call, with the field and details the server sent."""
        code: grpc.StatusCode = err.code()
        details: str = err.details() or ""
        try:
            status = rpc_status.from_call(err)
        except ValueError:  # details that contradict the call's code: ignore them
            status = None
        return cls(code, details, _field_of(err, status), status)

    @classmethod
    def from_api_error(cls, error: pb.ApiError, subject: str) -> QuartermasterError:
        """One item's error in a batch response (the code is a gRPC status name)."""
        code = getattr(grpc.StatusCode, error.code, grpc.StatusCode.UNKNOWN)
        return cls(code, f"{subject}: {error.field}: {error.message}", error.field)


def _field_of(err: grpc.RpcError, status: status_pb2.Status | None) -> str:
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info) and info.metadata.get("field"):
            return str(info.metadata["field"])
    for key, value in err.trailing_metadata() or ():
        if key == "x-qm-field":
            return str(value)
    return ""


SEQ_IN_TRAILER = ("x-qm-seq-in", "trailer")  # x-qm-seq in the trailing metadata, please


def answered_seq(call: Any) -> int:
    """The `x-qm-seq` a call answered (trailing metadata, else initial; 0 for none)."""
    for metadata in (call.trailing_metadata(), call.initial_metadata()):
        for key, value in metadata or ():
            if key == "x-qm-seq":
                return int(value)
    return 0


def limits(capacity: dict[str, int]) -> list[pb.CapacityLimit]:
    return [pb.CapacityLimit(capacity_unit=u, max_capacity=n) for u, n in capacity.items()]


class Quartermaster:
    """A blocking client of admission. Credentials: see `quartermaster.client.credentials`
    (by default the CA and admin token that `qm up` wrote under ./.qm-data/credentials/)."""

    def __init__(
        self,
        address: str | None = None,
        timeout: float = 30.0,
        *,
        token: str | None = None,
        ca_file: str | Path | None = None,
        credentials_dir: str | Path | None = None,
        insecure: bool | None = None,
    ) -> None:
        self.address = address or os.environ.get("QM_ADDRESS") or DEFAULT_ADDRESS
        self.timeout = timeout
        self.credentials = find_credentials(
            token=token, ca_file=ca_file, credentials_dir=credentials_dir, insecure=insecure
        )
        self.channel = self.credentials.channel(self.address)
        self.quota = rpc.QuotaManagementStub(self.channel)  # type: ignore[no-untyped-call]
        self.jobs = rpc.ServiceJobsStub(self.channel)  # type: ignore[no-untyped-call]
        self.pools = rpc.WarmPoolsStub(self.channel)  # type: ignore[no-untyped-call]
        self.nodes = rpc.NodesStub(self.channel)  # type: ignore[no-untyped-call]
        self.seq = 0

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Quartermaster:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def call(self, method: Any, request: Message) -> Any:
        """Unary call carrying the read-your-writes position both ways."""
        metadata = (("x-qm-min-seq", str(self.seq)), SEQ_IN_TRAILER)
        try:
            response, call = method.with_call(request, timeout=self.timeout, metadata=metadata)
        except grpc.RpcError as err:
            raise QuartermasterError.from_rpc_error(err) from err
        self.seq = max(self.seq, answered_seq(call))
        return response

    # ---- administration -------------------------------------------------
    def create_service_environment(self, name: str, capacity: dict[str, int]) -> Any:
        return self.call(
            self.quota.CreateServiceEnvironment,
            pb.CreateServiceEnvironmentRequest(
                service_environment_name=name, capacity_limits=limits(capacity)
            ),
        )

    def create_scheduling_policy(self, name: str) -> Any:
        return self.call(
            self.quota.CreateSchedulingPolicy,
            pb.CreateSchedulingPolicyRequest(
                name=name,
                quota_share_policy=pb.QuotaSharePolicy(
                    idle_resource_assignment_strategy=pb.IDLE_RESOURCE_ASSIGNMENT_STRATEGY_FIFO
                ),
            ),
        )

    def create_job_queue(self, name: str, service_environment: str, scheduling_policy: str) -> Any:
        return self.call(
            self.quota.CreateJobQueue,
            pb.CreateJobQueueRequest(
                job_queue_name=name,
                scheduling_policy_arn=scheduling_policy,
                service_environment_order=[
                    pb.ServiceEnvironmentOrder(order=1, service_environment=service_environment)
                ],
            ),
        )

    def _share_fields(
        self, strategy: str, borrow_limit: int | None, in_share_preemption: bool | None
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "resource_sharing_configuration": pb.ResourceSharingConfiguration(
                strategy=STRATEGIES[strategy], borrow_limit=borrow_limit
            )
        }
        if in_share_preemption is not None:
            fields["preemption_configuration"] = pb.QuotaSharePreemptionConfiguration(
                in_share_preemption=pb.IN_SHARE_PREEMPTION_ENABLED
                if in_share_preemption
                else pb.IN_SHARE_PREEMPTION_DISABLED
            )
        return fields

    def create_quota_share(
        self,
        job_queue: str,
        name: str,
        capacity: dict[str, int],
        strategy: str = "LEND_AND_BORROW",
        borrow_limit: int | None = None,
        in_share_preemption: bool = False,
    ) -> Any:
        return self.call(
            self.quota.CreateQuotaShare,
            pb.CreateQuotaShareRequest(
                job_queue=job_queue,
                quota_share_name=name,
                capacity_limits=limits(capacity),
                **self._share_fields(strategy, borrow_limit, in_share_preemption),
            ),
        )

    def update_quota_share(
        self,
        job_queue: str,
        name: str,
        capacity: dict[str, int],
        strategy: str = "LEND_AND_BORROW",
        borrow_limit: int | None = None,
        in_share_preemption: bool | None = None,
    ) -> Any:
        return self.call(
            self.quota.UpdateQuotaShare,
            pb.UpdateQuotaShareRequest(
                job_queue=job_queue,
                quota_share_name=name,
                capacity_limits=limits(capacity),
                **self._share_fields(strategy, borrow_limit, in_share_preemption),
            ),
        )

    def delete_quota_share(self, job_queue: str, name: str) -> Any:
        return self.call(
            self.quota.DeleteQuotaShare,
            pb.DeleteQuotaShareRequest(job_queue=job_queue, quota_share_name=name),
        )

    def describe_quota_share(self, job_queue: str, name: str) -> Any:
        return self.call(
            self.quota.DescribeQuotaShare,
            pb.DescribeQuotaShareRequest(job_queue=job_queue, quota_share_name=name),
        )

    def list_quota_shares(self, job_queue: str) -> list[Any]:
        return list(
            self.call(
                self.quota.ListQuotaShares, pb.ListQuotaSharesRequest(job_queue=job_queue)
            ).quota_shares
        )

    def queue_snapshot(self, job_queue: str, max_results: int = 20) -> Any:
        return self.call(
            self.quota.GetJobQueueSnapshot,
            pb.GetJobQueueSnapshotRequest(job_queue=job_queue, max_results=max_results),
        )

    def describe_job_queues(self, names: Sequence[str] = ()) -> list[Any]:
        return list(
            self.call(
                self.quota.DescribeJobQueues, pb.DescribeJobQueuesRequest(job_queues=list(names))
            ).job_queues
        )

    def describe_service_environments(self, names: Sequence[str] = ()) -> list[Any]:
        request = pb.DescribeServiceEnvironmentsRequest(service_environments=list(names))
        return list(self.call(self.quota.DescribeServiceEnvironments, request).service_environments)

    # ---- jobs, pools, nodes -----------------------------------------------
    def describe_job(self, job_id: str) -> Any:
        return self.call(
            self.jobs.DescribeServiceJob, pb.DescribeServiceJobRequest(job_id=job_id)
        ).job

    def list_jobs(
        self,
        job_queue: str,
        status: str | None = None,
        quota_share_name: str = "",
        *,
        all_statuses: bool | None = None,
        **filters: str,
    ) -> list[Any]:
        """Every page of ListServiceJobs, newest first; no status = every status.

        (AWS lists RUNNING jobs when no status and no filter is given; this client asks
        for every status then, with `all_statuses`, unless `all_statuses=False`.)
        `filters` by name: `JOB_NAME="train*"`.
        """
        if all_statuses is None:
            all_statuses = not status
        out: list[Any] = []
        token = ""
        while True:
            request = pb.ListServiceJobsRequest(
                job_queue=job_queue,
                quota_share_name=quota_share_name,
                job_status=pb.JobStatus.Value(f"JOB_STATUS_{status}") if status else None,
                filters=[pb.KeyValuesPair(name=k, values=[v]) for k, v in filters.items()],
                max_results=100,
                next_token=token,
                all_statuses=all_statuses,
            )
            response = self.call(self.jobs.ListServiceJobs, request)
            out.extend(response.job_summary_list)
            token = response.next_token
            if not token:
                return out

    def watch(
        self,
        job_ids: Sequence[str] = (),
        job_queue: str = "",
        timeout: float | None = None,
        statuses: Sequence[str] = (),
    ) -> Iterator[Any]:
        """Status changes as they happen; `statuses` (e.g. "SUCCEEDED") keeps only those."""
        request = pb.WatchServiceJobsRequest(
            job_queue=job_queue,
            job_ids=list(job_ids),
            statuses=[pb.JobStatus.Value(f"JOB_STATUS_{status.upper()}") for status in statuses],
        )
        try:
            yield from self.jobs.WatchServiceJobs(request, timeout=timeout)
        except grpc.RpcError as err:
            if err.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                return
            raise QuartermasterError.from_rpc_error(err) from err

    def list_warm_pools(self, status: str | None = None) -> list[Any]:
        value = pb.WarmPoolStatus.Value(f"WARM_POOL_STATUS_{status}") if status else None
        request = pb.ListWarmPoolsRequest(status=value)
        return list(self.call(self.pools.ListWarmPools, request).warm_pool_summaries)

    def update_warm_pool(self, job_id: str, keep_alive_seconds: int) -> Any:
        return self.call(
            self.pools.UpdateWarmPool,
            pb.UpdateWarmPoolRequest(
                job_id=job_id, keep_alive_period_in_seconds=keep_alive_seconds
            ),
        )

    def list_nodes(self) -> list[Any]:
        return list(self.call(self.nodes.ListNodes, pb.ListNodesRequest()).nodes)

    def drain_node(self, host_id: str) -> Any:
        return self.call(self.nodes.DrainNode, pb.DrainNodeRequest(host_id=host_id))

    def undrain_node(self, host_id: str) -> Any:
        return self.call(self.nodes.UndrainNode, pb.UndrainNodeRequest(host_id=host_id))


_default: Quartermaster | None = None
_default_lock = threading.Lock()


def default_client() -> Quartermaster:
    """The process's shared client, made on first use from the environment."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Quartermaster()
        return _default
