"""`qm up --node-processes`: each node agent in a process of its own, as on its own host.

The agents are real `python -m qm_node_agent` processes configured by environment;
they read their host feeds (the scheduler relays them), run jobs, restart one by one,
stop with the stack, and stop on their own when the stack that started them is gone
(their lifeline pipe closes) instead of running on beside the next stack's agents.
"""

from __future__ import annotations

import os
import subprocess

from conftest import StackFactory, client_for
from scenario import setup_queue, shell, status, until
from test_shared_fold_e2e import feed_messages, run_jobs

from quartermaster_stack.node_process import NodeProcess


def agents(stack_parts: dict[str, object]) -> list[NodeProcess]:
    return [part for part in stack_parts.values() if isinstance(part, NodeProcess)]


def test_agents_in_processes_of_their_own_run_jobs(make_stack: StackFactory) -> None:
    stack = make_stack(nodes=2, node_processes=True)
    started = agents(stack.stack.parts)
    assert len(started) == 2
    assert all(a.process.pid != os.getpid() and a.process.poll() is None for a in started)
    queue = setup_queue(client_for(stack), 2, [("A", 2, "LEND_AND_BORROW", None, False)])
    run_jobs(queue, [f"j{i}" for i in range(6)])
    c = queue.client
    jobs = [c.describe_job(job.job_id) for job in c.list_jobs("q")]
    hosts = {h for job in jobs for attempt in job.attempts for h in attempt.host_ids}
    assert hosts == {"node-1", "node-2"}  # both processes ran jobs
    assert feed_messages(stack) > 0  # from their host feeds, not a share of the fold

    first = stack.stack.parts["node-1"]
    assert isinstance(first, NodeProcess)
    stack.restart("node-1")  # a new process for the host; the old one has exited
    assert first.process.poll() is not None
    again = stack.stack.parts["node-1"]
    assert isinstance(again, NodeProcess) and again.process.pid != first.process.pid
    run_jobs(queue, ["after-restart-0", "after-restart-1", "after-restart-2"])

    last = agents(stack.stack.parts)
    for host in ("node-1", "node-2"):  # as the stack's own stop does, part by part
        stack.stop_part(host)
    assert all(a.process.poll() is not None for a in last)  # stopped and reaped


def test_an_agent_stops_when_its_stack_is_gone(make_stack: StackFactory) -> None:
    """Its lifeline closes (as when the stack is killed): the agent stops by itself,
    leaving a running job to the next agent of the host, which adopts it."""
    stack = make_stack(nodes=1, node_processes=True)
    queue = setup_queue(client_for(stack), 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    job = queue.submit(shell("sleep 3"), job_name="long", quota_share_name="A")
    c = queue.client
    until("running", lambda: status(c, job.job_id) == "RUNNING")
    agent = stack.stack.parts["node-1"]
    assert isinstance(agent, NodeProcess)
    os.close(agent._lifeline)  # what the stack's death does; no signal is sent
    try:
        agent.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        agent.process.kill()
        raise AssertionError("the agent outlived its lifeline") from None
    stack.restart("node-1")  # the next agent of the host adopts the job and sees it end
    until("succeeded", lambda: status(c, job.job_id) == "SUCCEEDED", timeout=60)
