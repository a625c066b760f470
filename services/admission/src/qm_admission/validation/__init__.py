"""Request validation: a request and the folded state in, the events to append out.

Pure functions, no I/O: time (`at`) and new ids come in as arguments. A request
that must not be written raises `RequestRejected(code, field, message)`.
"""

from qm_admission.validation.config import (
    create_job_queue,
    create_quota_share,
    create_scheduling_policy,
    create_service_environment,
    update_job_queue,
    update_quota_share,
    update_service_environment,
)
from qm_admission.validation.jobs import (
    check_client_token,
    queue_name,
    submit_job,
    terminate_job,
    update_job,
)
from qm_admission.validation.operations import drain_node, undrain_node, update_warm_pool
from qm_admission.validation.payload import TrainingResources, parse_payload
from qm_admission.validation.resources import (
    delete_job_queue,
    delete_quota_share,
    delete_scheduling_policy,
    delete_service_environment,
    tag_resource,
    untag_resource,
    update_scheduling_policy,
)

__all__ = [
    "TrainingResources",
    "check_client_token",
    "create_job_queue",
    "create_quota_share",
    "create_scheduling_policy",
    "create_service_environment",
    "delete_job_queue",
    "delete_quota_share",
    "delete_scheduling_policy",
    "delete_service_environment",
    "drain_node",
    "parse_payload",
    "queue_name",
    "submit_job",
    "tag_resource",
    "terminate_job",
    "undrain_node",
    "untag_resource",
    "update_job",
    "update_job_queue",
    "update_quota_share",
    "update_scheduling_policy",
    "update_service_environment",
    "update_warm_pool",
]
