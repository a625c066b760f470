"""Where the agent keeps things under DATA_DIR, and the names it gives them.

DATA_DIR/attempts/records.slots             the launched attempts' records (records.py)
DATA_DIR/attempts/<job>.<attempt>.json      a record of the older layout (moved into slots)
DATA_DIR/jobs/<job>-<attempt>/              process runtime: the job's working dir
DATA_DIR/jobs/<job>-<attempt>.log           process runtime: stdout and stderr
DATA_DIR/jobs/<job>-<attempt>.exit          process runtime: the wrapper's exit status
DATA_DIR/logs/<job>-<attempt>.log           an ended attempt's output, kept (capped)
DATA_DIR/logs/<job>-<attempt>.json          a capped log: what of it was kept, and when it ended
DATA_DIR/warmpool-cache/<chain>/            a warm pool chain's persistent cache
DATA_DIR/opt-ml/<chain>/ml/                  the chain's /opt/ml tree (contract/stage.py)
DATA_DIR/opt-ml/<chain>/hosts                its jobs' /etc/hosts (algo-1..algo-N)
DATA_DIR/opt-ml/<chain>/staged.json          which objects its channels hold, by ETag
DATA_DIR/spare/d<n>/, DATA_DIR/spare/f<n>    emptied folders and files kept for reuse (spares.py)
"""

from __future__ import annotations

import re
from pathlib import Path

CONTAINER_CACHE_DIR = "/opt/ml/sagemaker/warmpoolcache"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe_name(name: str) -> str:
    """A file/container name token for an id (ids are `[A-Za-z0-9_-]` already)."""
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    return cleaned or "_"


def container_name(job_id: str, attempt: int) -> str:
    return f"qm-{safe_name(job_id)}-{attempt}"


class Layout:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.attempts = data_dir / "attempts"
        self.jobs = data_dir / "jobs"
        self.cache_root = data_dir / "warmpool-cache"
        self.logs = data_dir / "logs"
        self.spares = data_dir / "spare"
        self.ml_root = data_dir / "opt-ml"

    def create(self) -> None:
        folders = (self.attempts, self.jobs, self.cache_root, self.logs, self.spares, self.ml_root)
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)

    @property
    def records_file(self) -> Path:
        return self.attempts / "records.slots"

    @property
    def view_mark_file(self) -> Path:
        """The position of the newest view this host forgot an attempt by (`ViewMark`)."""
        return self.attempts / "view.mark"

    def record(self, job_id: str, attempt: int) -> Path:
        return self.attempts / f"{safe_name(job_id)}.{attempt}.json"

    def work_dir(self, job_id: str, attempt: int) -> Path:
        return self.jobs / f"{safe_name(job_id)}-{attempt}"

    def log_file(self, job_id: str, attempt: int) -> Path:
        return self.jobs / f"{safe_name(job_id)}-{attempt}.log"

    def exit_file(self, job_id: str, attempt: int) -> Path:
        return self.jobs / f"{safe_name(job_id)}-{attempt}.exit"

    def cache_dir(self, chain_id: str) -> Path:
        return self.cache_root / safe_name(chain_id)

    def ml_dir(self, chain_id: str) -> Path:
        return self.ml_root / safe_name(chain_id) / "ml"

    def hosts_file(self, chain_id: str) -> Path:
        return self.ml_root / safe_name(chain_id) / "hosts"
