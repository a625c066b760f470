"""The SageMaker training-job payload of a submission: what scheduling needs from it.

The parts the scheduler and warm pools use are checked (types and bounds), and so
are the data locations a host stages and uploads (`training_data`) and, where the
stack maps execution roles to credentials, the role; every other key is the job
runner's business and passes through, once the whole document is known to be
storable (`hostile.check_json`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from qm_admission.errors import invalid
from qm_admission.validation.hostile import INT32_MAX, parse_json
from qm_admission.validation.json_fields import (
    a_boolean,
    a_string,
    an_integer,
    an_object,
    sorted_strings,
)
from qm_admission.validation.training_data import check_training_data
from quartermaster.events import WarmPoolKey

FIELD = "service_request_payload"
MAX_PAYLOAD_BYTES = 256 * 1024


class TrainingResources(msgspec.Struct, frozen=True):
    instance_type: str
    instance_count: int
    keep_alive_seconds: int
    max_runtime_seconds: int | None
    warm_pool_key: WarmPoolKey
    document: dict[str, Any]  # the whole payload, parsed (checks that need more of it)


def parse_payload(
    text: str, max_keep_alive_seconds: int, known_roles: frozenset[str] | None = None
) -> TrainingResources:
    """Check the payload and pull out resources, limits and the warm-pool match key.

    `known_roles`: the execution roles of the stack's role map; None checks no role."""
    if not text:
        raise invalid(FIELD, "is required (the training-job request as a JSON object)")
    if len(text.encode()) > MAX_PAYLOAD_BYTES:
        raise invalid(FIELD, f"is larger than {MAX_PAYLOAD_BYTES} bytes")
    try:
        doc = parse_json(text, FIELD)
    except ValueError as err:
        raise invalid(FIELD, f"is not valid JSON: {err}") from err
    except RecursionError as err:
        raise invalid(FIELD, "nests too deeply") from err
    if not isinstance(doc, dict):
        raise invalid(FIELD, "must be a JSON object")

    resources = an_object(doc, "ResourceConfig", FIELD, required=True)
    at = f"{FIELD}.ResourceConfig"
    instance_type = a_string(resources, "InstanceType", at, required=True)
    # Counts and sizes stay within int32, like the API fields that report them.
    instance_count = an_integer(
        resources, "InstanceCount", at, minimum=1, maximum=INT32_MAX, required=True
    )
    keep_alive = an_integer(
        resources, "KeepAlivePeriodInSeconds", at, minimum=0, maximum=max_keep_alive_seconds
    )
    volume_size = an_integer(resources, "VolumeSizeInGB", at, minimum=0, maximum=INT32_MAX)
    volume_kms = a_string(resources, "VolumeKmsKeyId", at)

    stopping = an_object(doc, "StoppingCondition", FIELD)
    max_runtime = an_integer(
        stopping, "MaxRuntimeInSeconds", f"{FIELD}.StoppingCondition", minimum=1, maximum=INT32_MAX
    )

    vpc = an_object(doc, "VpcConfig", FIELD)
    chaining = an_object(doc, "SessionChainingConfig", FIELD)
    tag_chaining = a_boolean(chaining, "EnableSessionTagChaining", f"{FIELD}.SessionChainingConfig")
    tag_keys = _tag_keys(doc) if tag_chaining else ()

    key = WarmPoolKey(
        role_arn=a_string(doc, "RoleArn", FIELD) or "",
        instance_type=instance_type or "",
        instance_count=instance_count or 1,
        volume_kms_key_id=volume_kms or "",
        volume_size_in_gb=volume_size or 0,
        security_group_ids=sorted_strings(vpc, "SecurityGroupIds", f"{FIELD}.VpcConfig"),
        subnets=sorted_strings(vpc, "Subnets", f"{FIELD}.VpcConfig"),
        inter_container_traffic_encryption=a_boolean(
            doc, "EnableInterContainerTrafficEncryption", FIELD
        ),
        network_isolation=a_boolean(doc, "EnableNetworkIsolation", FIELD),
        session_tag_chaining=tag_chaining,
        session_tag_keys=tag_keys,
    )
    names_s3 = check_training_data(doc, FIELD)
    _check_role(key.role_arn, names_s3, known_roles)
    return TrainingResources(
        instance_type=key.instance_type,
        instance_count=key.instance_count,
        keep_alive_seconds=keep_alive or 0,
        max_runtime_seconds=max_runtime,
        warm_pool_key=key,
        document=doc,
    )


def _check_role(role_arn: str, names_s3: bool, known_roles: frozenset[str] | None) -> None:
    """A role must be one the hosts have credentials for; S3 locations need a role."""
    if known_roles is None:
        return
    field = f"{FIELD}.RoleArn"
    if not role_arn:
        if names_s3:
            raise invalid(
                field,
                "is required: the job names S3 locations, and its execution role says "
                "with which credentials hosts reach them",
            )
        return
    if role_arn not in known_roles:
        raise invalid(
            field, f"role {role_arn!r} is not an execution role of this stack (its roles file)"
        )


def _tag_keys(doc: dict[str, Any]) -> tuple[str, ...]:
    """Keys of the payload's `Tags` ([{Key, Value}]): chained session tags must match."""
    tags = doc.get("Tags")
    if tags is None:
        return ()
    if not isinstance(tags, list) or not all(
        isinstance(t, dict) and isinstance(t.get("Key"), str) for t in tags
    ):
        raise invalid(f"{FIELD}.Tags", 'must be a list of {"Key": ..., "Value": ...} objects')
    return tuple(sorted({t["Key"] for t in tags}))
