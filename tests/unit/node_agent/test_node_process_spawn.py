"""How the process runtime starts a job's wrapper (`posix_spawn`): what the job gets
from the agent, and that the agent reaps it."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from process_attempt import attempt

from qm_node_agent.launch import LaunchSpec
from qm_node_agent.records import AttemptRecord
from qm_node_agent.runtime.process import ProcessRuntime
from qm_node_agent.spares import Spares


def launch(tmp_path: Path, script: str) -> tuple[ProcessRuntime, AttemptRecord, LaunchSpec]:
    runtime = ProcessRuntime(Spares(tmp_path / "spares"), namespaces=False)
    payload: dict[str, object] = {
        "AlgorithmSpecification": {
            "TrainingImage": "x",
            "ContainerEntrypoint": ["sh", "-c", script],
        }
    }
    spec, record = attempt(tmp_path, payload)
    return runtime, record, spec


def test_the_job_inherits_no_descriptor_of_the_agent_but_stdio(tmp_path: Path) -> None:
    """Not even one the agent itself inherited without close-on-exec."""
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    pipe = os.readlink(f"/proc/self/fd/{write_end}")
    seen = tmp_path / "fds"
    script = f'for f in /proc/$$/fd/*; do readlink "$f"; done > {seen}; echo $$ >> {seen}'
    try:
        runtime, record, spec = launch(tmp_path, script)

        async def main() -> int:
            job = await runtime.launch(spec, record)
            return (await job.wait()).exit_code

        assert asyncio.run(main()) == 0
    finally:
        os.close(read_end)
        os.close(write_end)
    lines = seen.read_text().splitlines()
    assert pipe not in lines[:-1]
    assert lines[0] == os.devnull  # stdin


def test_a_wrapper_killed_by_a_signal_ends_as_that_signal_and_is_reaped(
    tmp_path: Path,
) -> None:
    runtime, record, spec = launch(tmp_path, "sleep 30")

    async def main() -> tuple[int, int | None]:
        job = await runtime.launch(spec, record)
        assert job.pid is not None
        os.kill(job.pid, signal.SIGKILL)  # the wrapper itself: no exit file is written
        os.killpg(job.pid, signal.SIGKILL)
        return (await job.wait()).exit_code, job.pid

    exit_code, pid = asyncio.run(main())
    assert exit_code == 128 + signal.SIGKILL
    assert not Path(f"/proc/{pid}").exists()  # reaped: no zombie left
