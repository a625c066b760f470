"""A job must say what to run where hosts run processes (`qm up --runtime process`).

There a job runs `AlgorithmSpecification.ContainerEntrypoint` plus `ContainerArguments`
as a process; with no entrypoint there is nothing to start, and the attempt would
fail on the host after the job waited its turn. Admission refuses it at once
(`Settings.require_command`); container hosts may run an image's own entrypoint.
"""

from __future__ import annotations

from typing import Any

from qm_admission.errors import invalid
from qm_admission.validation.payload import FIELD

ENTRYPOINT_FIELD = f"{FIELD}.AlgorithmSpecification.ContainerEntrypoint"


def check_command(doc: dict[str, Any]) -> None:
    """INVALID_ARGUMENT on the entrypoint field unless it names a program; `doc` is the
    parsed payload (`parse_payload`'s `document`)."""
    spec = doc.get("AlgorithmSpecification")
    entrypoint = spec.get("ContainerEntrypoint") if isinstance(spec, dict) else None
    if not (isinstance(entrypoint, list) and entrypoint and isinstance(entrypoint[0], str)):
        raise invalid(
            ENTRYPOINT_FIELD,
            "is required: the job's command (`qm job submit ... -- COMMAND ARGS`); "
            "hosts of this stack run jobs as processes",
        )
    if not entrypoint[0].strip():
        raise invalid(ENTRYPOINT_FIELD, "must start with a program name")
