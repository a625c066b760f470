"""Restore drill: a stack's exported log brought back on a fresh stack (`qm up --restore`).

The operator's procedure of deploy/README.md ("Restoring from the log"): `qm log
export` on the old stack, then `qm up --restore FILE` on an empty data dir, which
imports before any service starts. The drill checks what an operator would: the
imported part of the new log is the old log byte for byte at the same seqs (so it
folds to the same state), the API answers the same for environments, queues,
shares, jobs and warm pools, `qm audit verify` passes on the new log, new work
schedules, and a second import into the now used stream is refused in one line.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from qm_up import VENV_BIN, RunningStack, qm_up
from scenario import play_seed_scenario, shell, status, until

from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.audit import read_log
from quartermaster.audit.restore import state_digest
from quartermaster.client import Quartermaster, TrainingQueue

QM = str(VENV_BIN / "qm")
ENDED = ("SUCCEEDED", "FAILED")


def qm(*args: str) -> subprocess.CompletedProcess[str]:
    """`qm` in a shell with none of qm's settings: the data dir says where the stack is."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QM_")}
    return subprocess.run([QM, *args], env=env, capture_output=True, text=True, timeout=120)


def client(stack: RunningStack) -> Quartermaster:
    return Quartermaster(stack.address, timeout=20, credentials_dir=stack.data_dir / "credentials")


def answers(c: Quartermaster) -> dict[str, Any]:
    """What the API says about every resource, job and warm pool (ids included)."""

    def shown(messages: Any) -> list[dict[str, Any]]:
        return [MessageToDict(m) for m in messages]

    queues = c.describe_job_queues()
    names = sorted(q.job_queue_name for q in queues)
    return {
        "environments": shown(c.describe_service_environments()),
        "queues": shown(queues),
        "shares": {q: shown(c.list_quota_shares(q)) for q in names},
        "jobs": {
            j.job_id: MessageToDict(c.describe_job(j.job_id)) for q in names for j in c.list_jobs(q)
        },
        "pools": sorted(
            (MessageToDict(p) for p in c.list_warm_pools()), key=lambda p: str(sorted(p.items()))
        ),
    }


def play_warm_pool_chain(c: Quartermaster) -> None:
    """QS3's idle host: a pool Available, Reused by a matching job, whose own pool expires."""
    queue = TrainingQueue("q", c)
    a = queue.submit(shell("exit 0", keep_alive_seconds=300), job_name="a", quota_share_name="QS3")
    until("a's pool Available", lambda: pool(c, a.job_id) == pb.WARM_POOL_STATUS_AVAILABLE)
    b = queue.submit(shell("exit 0", keep_alive_seconds=1), job_name="b", quota_share_name="QS3")
    until("b's pool expired", lambda: pool(c, b.job_id) == pb.WARM_POOL_STATUS_TERMINATED)
    assert pool(c, a.job_id) == pb.WARM_POOL_STATUS_REUSED


def pool(c: Quartermaster, job_id: str) -> int:
    return int(c.describe_job(job_id).warm_pool_status.status)


def end_every_job(c: Quartermaster) -> None:
    """The seed scenario leaves `high` and `med` running again: the drill stops them, so
    that the log ends quiet and both stacks must answer alike (a restored stack's
    agents start a job the log says runs on their host afresh, or the host-loss
    rules requeue it: deploy/README.md)."""
    jobs = [j.job_id for j in c.list_jobs("q")]
    for job_id in jobs:
        if status(c, job_id) not in ENDED:
            c.call(
                c.jobs.TerminateServiceJob,
                pb.TerminateServiceJobRequest(job_id=job_id, reason="drill"),
            )
    until("every job ended", lambda: all(status(c, j) in ENDED for j in jobs))
    until("every host free", lambda: all(not n.job_id for n in c.list_nodes()))


def test_a_restored_stack_answers_as_the_old_one_and_schedules_new_work(tmp_path: Path) -> None:
    exported = tmp_path / "x.jsonl"
    with qm_up(tmp_path / "old") as old:
        c = client(old)
        play_seed_scenario(c)
        end_every_job(c)  # else `high` or `med` (they match) may take a's pool first
        play_warm_pool_chain(c)
        until("every host free", lambda: all(not n.job_id for n in c.list_nodes()))
        done = qm("log", "export", "--out", str(exported), "--data-dir", str(old.data_dir))
        assert done.returncode == 0, done.stderr
        messages = len(list(read_log(exported)))
        before = answers(c)

        with qm_up(tmp_path / "new", "--restore", str(exported)) as new:
            assert f"restored {messages} messages" in "".join(new.output)
            n = client(new)
            until("the restored hosts serve", lambda: healthy(n) == healthy(c) == 3)
            assert answers(n) == before

            # The imported part of the new log is the old log: seqs, subjects and bytes.
            copies = [tmp_path / "old.qmlog", tmp_path / "new.qmlog"]
            for copy, stack in zip(copies, (old, new), strict=True):
                done = qm(
                    *("log", "export", "--format", "msgpack", "--to-seq", str(messages)),
                    *("--out", str(copy), "--data-dir", str(stack.data_dir)),
                )
                assert done.returncode == 0, done.stderr
            assert copies[0].read_bytes() == copies[1].read_bytes()
            assert state_digest(read_log(copies[1])) == state_digest(read_log(exported))

            verified = qm("audit", "verify", "--data-dir", str(new.data_dir))
            assert verified.returncode == 0, verified.stdout + verified.stderr

            queue = TrainingQueue("q", n)
            after = queue.submit(shell("exit 0"), job_name="after", quota_share_name="QS2")
            until("a job submitted after the restore succeeds", lambda: ended(n, after.job_id))
            assert status(n, after.job_id) == "SUCCEEDED"

            again = qm("log", "import", str(exported), "--data-dir", str(new.data_dir))
            assert again.returncode == 1
            [line] = again.stderr.splitlines()
            assert line.startswith("qm: error: stream QM already holds "), line


def healthy(c: Quartermaster) -> int:
    return sum(1 for n in c.list_nodes() if n.state == pb.NODE_STATE_HEALTHY)


def ended(c: Quartermaster, job_id: str) -> bool:
    return status(c, job_id) in ENDED
