"""After the job ends: its failure file, and its model and output data to S3.

`/opt/ml/model` becomes `<S3OutputPath>/<training job name>/output/model.tar.gz` and
`/opt/ml/output/data` `output.tar.gz` beside it, whether the job succeeded, failed
or was stopped (terminate, timeout, preemption), as SageMaker does. The archives
are built in the chain's folder and uploaded whole (a multipart upload appears
only once complete); transient store faults are retried with backoff by the
adapter, and an upload that still fails raises: a job is not reported SUCCEEDED
until its model is durable.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import msgspec

from qm_node_agent.contract.spec import Outputs
from quartermaster.objectstore import S3Access, StoreClientError, parse_s3_uri
from quartermaster.objectstore.store import ObjectStore

FAILURE_CHARS = 1024


class Collected(msgspec.Struct, frozen=True):
    model_artifacts: str = ""  # the model's S3 URI once uploaded
    uploaded_bytes: int = 0


def failure_reason(outputs: Outputs) -> str:
    """The first 1024 characters of /opt/ml/output/failure ("" when there is none)."""
    path = Path(outputs.ml_dir) / "output" / "failure"
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(FAILURE_CHARS).strip()
    except OSError:
        return ""


def collect(outputs: Outputs, access: S3Access | None) -> Collected:
    """Upload the model and output data (runs in a worker thread). Raises
    `StoreClientError` / `StoreUnavailable` when an upload fails for good."""
    if not outputs.output_path or not outputs.uploads:
        return Collected()
    if access is None:
        raise StoreClientError(
            f"the job's RoleArn {outputs.role_arn!r} maps to no object-store credentials"
        )
    ml = Path(outputs.ml_dir)
    store = ObjectStore(access, max_retries=8, retry_timeout_s=120.0)
    moved = 0
    for folder, uri in (
        (ml / "output" / "data", outputs.output_uri),
        (ml / "model", outputs.model_uri),
    ):
        archive = ml.parent / (Path(uri).name + ".part")
        try:
            _archive(folder, archive)
            moved += store.upload(archive, parse_s3_uri(uri))
        finally:
            archive.unlink(missing_ok=True)
    return Collected(outputs.model_uri, moved)


def _archive(folder: Path, archive: Path) -> None:
    """A gzipped tar of the folder's contents (names relative to it, as SageMaker's)."""
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        if folder.is_dir():
            for entry in sorted(folder.iterdir()):
                tar.add(entry, arcname=entry.name)
