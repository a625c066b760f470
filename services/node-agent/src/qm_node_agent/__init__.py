"""Quartermaster node agent: runs the job attempts the log dispatches to its GPU host.

Names are imported on first use, so importing one module (e.g. `qm_node_agent.wrapper`,
which holds the per-attempt shell wrapper) does not import the whole agent.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qm_node_agent.agent import NodeAgent, make_runtime
    from qm_node_agent.settings import NodeSettings, RuntimeKind

__all__ = ["NodeAgent", "NodeSettings", "RuntimeKind", "make_runtime"]


def __getattr__(name: str) -> Any:
    if name in ("NodeAgent", "make_runtime"):
        from qm_node_agent import agent

        return getattr(agent, name)
    if name in ("NodeSettings", "RuntimeKind"):
        from qm_node_agent import settings

        return getattr(settings, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
