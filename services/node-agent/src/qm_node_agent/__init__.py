"""Quartermaster node agent: runs the job attempts the log dispatches to its GPU host."""

from qm_node_agent.agent import NodeAgent, make_runtime
from qm_node_agent.settings import NodeSettings, RuntimeKind

__all__ = ["NodeAgent", "NodeSettings", "RuntimeKind", "make_runtime"]
