"""The SageMaker training-job payload of a submission: what scheduling needs from it.

Only the parts the scheduler and warm pools use are checked (types and bounds);
every other key is the job runner's business and passes through, once the whole
document is known to be storable (`hostile.check_json`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from qm_admission.errors import invalid
from qm_admission.validation.hostile import INT32_MAX, parse_json
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


def parse_payload(text: str, max_keep_alive_seconds: int) -> TrainingResources:
    """Check the payload and pull out resources, limits and the warm-pool match key."""
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

    resources = _object(doc, "ResourceConfig", FIELD, required=True)
    at = f"{FIELD}.ResourceConfig"
    instance_type = _string(resources, "InstanceType", at, required=True)
    # Counts and sizes stay within int32, like the API fields that report them.
    instance_count = _integer(
        resources, "InstanceCount", at, minimum=1, maximum=INT32_MAX, required=True
    )
    keep_alive = _integer(
        resources, "KeepAlivePeriodInSeconds", at, minimum=0, maximum=max_keep_alive_seconds
    )
    volume_size = _integer(resources, "VolumeSizeInGB", at, minimum=0, maximum=INT32_MAX)
    volume_kms = _string(resources, "VolumeKmsKeyId", at)

    stopping = _object(doc, "StoppingCondition", FIELD)
    max_runtime = _integer(
        stopping, "MaxRuntimeInSeconds", f"{FIELD}.StoppingCondition", minimum=1, maximum=INT32_MAX
    )

    vpc = _object(doc, "VpcConfig", FIELD)
    chaining = _object(doc, "SessionChainingConfig", FIELD)
    tag_chaining = _boolean(chaining, "EnableSessionTagChaining", f"{FIELD}.SessionChainingConfig")
    tag_keys = _tag_keys(doc) if tag_chaining else ()

    key = WarmPoolKey(
        role_arn=_string(doc, "RoleArn", FIELD) or "",
        instance_type=instance_type or "",
        instance_count=instance_count or 1,
        volume_kms_key_id=volume_kms or "",
        volume_size_in_gb=volume_size or 0,
        security_group_ids=_sorted_strings(vpc, "SecurityGroupIds", f"{FIELD}.VpcConfig"),
        subnets=_sorted_strings(vpc, "Subnets", f"{FIELD}.VpcConfig"),
        inter_container_traffic_encryption=_boolean(
            doc, "EnableInterContainerTrafficEncryption", FIELD
        ),
        network_isolation=_boolean(doc, "EnableNetworkIsolation", FIELD),
        session_tag_chaining=tag_chaining,
        session_tag_keys=tag_keys,
    )
    return TrainingResources(
        instance_type=key.instance_type,
        instance_count=key.instance_count,
        keep_alive_seconds=keep_alive or 0,
        max_runtime_seconds=max_runtime,
        warm_pool_key=key,
        document=doc,
    )


def _object(doc: dict[str, Any], key: str, at: str, *, required: bool = False) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        if required:
            raise invalid(f"{at}.{key}", "is required")
        return {}
    if not isinstance(value, dict):
        raise invalid(f"{at}.{key}", "must be a JSON object")
    return value


def _string(doc: dict[str, Any], key: str, at: str, *, required: bool = False) -> str | None:
    value = doc.get(key)
    if value is None or value == "":
        if required:
            raise invalid(f"{at}.{key}", "is required")
        return None
    if not isinstance(value, str):
        raise invalid(f"{at}.{key}", "must be a string")
    return value


def _integer(
    doc: dict[str, Any],
    key: str,
    at: str,
    *,
    minimum: int,
    maximum: int | None = None,
    required: bool = False,
) -> int | None:
    value = doc.get(key)
    if value is None:
        if required:
            raise invalid(f"{at}.{key}", "is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{at}.{key}", "must be an integer")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise invalid(f"{at}.{key}", f"must be {bound}, got {value}")
    return value


def _boolean(doc: dict[str, Any], key: str, at: str) -> bool:
    value = doc.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise invalid(f"{at}.{key}", "must be true or false")
    return value


def _sorted_strings(doc: dict[str, Any], key: str, at: str) -> tuple[str, ...]:
    value = doc.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid(f"{at}.{key}", "must be a list of strings")
    return tuple(sorted(set(value)))


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
