"""What a docker host keeps for one warm pool chain, and the job script a sandbox runs.

Per chain (`DATA_DIR/warm/<chain>/`): `control/job.sh` (the next job's environment
and command, seen at /opt/ml/qm; the chain's /opt/ml tree is the contract's, see
contract/stage.py).
In the engine: the volume `qm-vol-<host>-<chain>` (over the chain's persistent
cache) and, between two jobs, the ready sandbox `qm-sandbox-<host>-<chain>`: a container
created with every mount, whose entrypoint runs whatever job.sh says when it
starts. Pure file work here; the docker calls are in docker.py.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from qm_node_agent.errors import LaunchError
from qm_node_agent.launch import LaunchSpec
from qm_node_agent.layout import safe_name
from quartermaster.files import write_whole

CHAIN_LABEL = "org.quartermaster.warm-chain"
HOST_LABEL = "org.quartermaster.warm-host"  # agents sharing an engine free only their own
SIZE_LABEL = "org.quartermaster.volume-size-gb"
CONTROL_DIR = "/opt/ml/qm"
JOB_SCRIPT = "job.sh"
SANDBOX_PREFIX = "qm-sandbox-"
VOLUME_PREFIX = "qm-vol-"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ChainFiles:
    def __init__(self, root: Path, chain_id: str, host_id: str = "") -> None:
        self.chain_id = chain_id
        self.host_id = host_id
        owner = f"{safe_name(host_id)}-" if host_id else ""  # a chain may span hosts
        self.dir = root / safe_name(chain_id)
        self.control = self.dir / "control"
        self.sandbox = SANDBOX_PREFIX + owner + safe_name(chain_id)
        self.volume = VOLUME_PREFIX + owner + safe_name(chain_id)
        self.labels = [f"{CHAIN_LABEL}={chain_id}", f"{HOST_LABEL}={host_id}"]

    def create(self) -> None:
        self.control.mkdir(parents=True, exist_ok=True)


def write_job_script(files: ChainFiles, spec: LaunchSpec, command: list[str], cache: str) -> None:
    """job.sh for this attempt: export its environment, then exec its command (tini is pid 1)."""
    lines = ["# written by the node agent for one attempt"]
    for name, value in spec.environment_with_cache(cache).items():
        if not _ENV_NAME.match(name):
            raise LaunchError.client(f"Environment name {name!r} is not [a-zA-Z_][a-zA-Z0-9_]*")
        lines.append(f"export {name}={shlex.quote(value)}")
    program = shlex.quote(command[0])
    failed = shlex.quote(f"[FATAL qm-sandbox] exec {command[0]} failed: No such file or directory")
    lines.append(f"command -v {program} >/dev/null 2>&1 || {{ echo {failed} >&2; exit 127; }}")
    lines.append("exec " + " ".join(shlex.quote(word) for word in command))
    path = files.control / JOB_SCRIPT
    write_whole(path, "\n".join(lines) + "\n", mode=0o644)


def image_ref(registry: str, image: str) -> str:
    """The image as the host pulls it: names without a registry host come from `registry`."""
    if not registry:
        return image
    first = image.split("/", 1)[0]
    has_host = "/" in image and ("." in first or ":" in first or first == "localhost")
    return image if has_host else f"{registry.rstrip('/')}/{image}"
