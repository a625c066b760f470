"""The seed scenario through gRPC, with real node agents running real processes."""

from __future__ import annotations

from conftest import StackFactory, client_for
from scenario import LONG, setup_queue, shell, status, until


def test_seed_scenario_through_grpc(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=3)
    c = client_for(stack)
    queue = setup_queue(
        c,
        3,
        [
            ("QS1", 1, "LEND_AND_BORROW", 200, True),
            ("QS2", 1, "LEND", None, False),
            ("QS3", 1, "RESERVE", None, False),
        ],
    )
    high = queue.submit(shell(LONG), "high", "QS1", priority=3)
    med = queue.submit(shell(LONG), "med", "QS1", priority=2)
    low = queue.submit(shell(LONG), "low", "QS1", priority=1)
    until("high and med run", lambda: status(c, high.job_id) == status(c, med.job_id) == "RUNNING")
    assert status(c, low.job_id) == "RUNNABLE"
    med_hosts = list(c.describe_job(med.job_id).attempts[-1].host_ids)

    qs2 = queue.submit(shell(LONG), "qs2_job_1", "QS2", priority=1)
    until("qs2_job_1 runs", lambda: status(c, qs2.job_id) == "RUNNING")
    med_detail = c.describe_job(med.job_id)
    assert status(c, med.job_id) == "RUNNABLE"
    assert med_detail.preemption_summary.preempted_attempt_count == 1
    assert med_detail.status_reason.startswith("Preempted")
    assert list(c.describe_job(qs2.job_id).attempts[-1].host_ids) == med_hosts

    low.update(scheduling_priority=4)
    until("low runs", lambda: status(c, low.job_id) == "RUNNING")
    assert status(c, high.job_id) == "RUNNABLE"
    assert status(c, med.job_id) == "RUNNABLE"

    used = {
        h
        for j in (high, med, low, qs2)
        for a in c.describe_job(j.job_id).attempts
        for h in a.host_ids
    }
    assert len(used) == 2, f"QS3's host must stay idle throughout, used: {used}"
    for job in (low, qs2):
        job.terminate("test over")
    until("terminated", lambda: status(c, low.job_id) == status(c, qs2.job_id) == "FAILED")
