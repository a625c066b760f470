"""Restarting the scheduler, admission and a node agent mid-run loses and duplicates nothing."""

from __future__ import annotations

from pathlib import Path

from conftest import StackFactory, client_for
from scenario import setup_queue, shell, status, until


def test_restarts_lose_and_duplicate_nothing(make_stack: StackFactory, tmp_path: Path) -> None:
    stack = make_stack(nodes=2)
    c = client_for(stack)
    queue = setup_queue(c, 2, [("A", 2, "LEND_AND_BORROW", None, False)])
    starts = tmp_path / "starts"
    script = f'echo "$QM_JOB_ID $QM_ATTEMPT" >> {starts}; sleep 3'
    jobs = [queue.submit(shell(script), job_name=f"job{i}", quota_share_name="A") for i in range(4)]
    until("two jobs run", lambda: sum(status(c, j.job_id) == "RUNNING" for j in jobs) == 2)
    running = [j.job_id for j in jobs if status(c, j.job_id) == "RUNNING"]

    stack.restart("scheduler")
    stack.restart("node-1")
    stack.restart("admission")
    more = [
        queue.submit(shell(script), job_name=f"late{i}", quota_share_name="A") for i in range(2)
    ]  # same channel
    everything = jobs + more
    until(
        "all succeeded",
        lambda: all(status(c, j.job_id) == "SUCCEEDED" for j in everything),
        timeout=90,
    )
    # The node agent restarted while its job ran: it re-adopted the attempt.
    assert all(len(c.describe_job(j).attempts) == 1 for j in running)
    lines = Path(starts).read_text().split()
    started = lines[0::2]
    assert sorted(started) == sorted(j.job_id for j in everything), "each job started exactly once"
    assert len(c.list_jobs("q")) == len(everything)
