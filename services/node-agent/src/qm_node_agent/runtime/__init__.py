"""Container runtimes: where a job's process actually runs (a process group or a container)."""

from qm_node_agent.runtime.base import ExitStatus, JobRuntime, RunningJob
from qm_node_agent.runtime.docker import DockerRuntime
from qm_node_agent.runtime.process import ProcessRuntime

__all__ = ["DockerRuntime", "ExitStatus", "JobRuntime", "ProcessRuntime", "RunningJob"]
