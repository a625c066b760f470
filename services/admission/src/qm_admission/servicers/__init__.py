"""The four gRPC services of qm.v1, as grpc.aio servicers over shared backends."""

from qm_admission.servicers.base import Backends
from qm_admission.servicers.explain import ExplainingServiceJobs
from qm_admission.servicers.jobs import ServiceJobs
from qm_admission.servicers.nodes import Nodes
from qm_admission.servicers.pools import WarmPools
from qm_admission.servicers.quota import QuotaManagement

__all__ = [
    "Backends",
    "ExplainingServiceJobs",
    "Nodes",
    "QuotaManagement",
    "ServiceJobs",
    "WarmPools",
]
