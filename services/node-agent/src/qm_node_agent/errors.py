"""Errors of the node agent: one base, split into transient and permanent."""

from __future__ import annotations

from quartermaster.events import FailureClass


class NodeAgentError(Exception):
    """Base error of `qm_node_agent`."""


class TransientNodeAgentError(NodeAgentError):
    """The same call may succeed later (a slow or restarting dependency)."""


class PermanentNodeAgentError(NodeAgentError):
    """Wrong as it is; retrying does not help."""


class SettingsError(PermanentNodeAgentError):
    """A `QM_NODE_*` variable is missing or malformed."""


class LaunchError(PermanentNodeAgentError):
    """A job could not be started; `failure_class` says whose fault it is.

    CLIENT_ERROR: the request cannot run (image missing, command not found).
    INFRASTRUCTURE_ERROR: the runtime itself failed (docker daemon error).
    """

    def __init__(self, failure_class: FailureClass, reason: str) -> None:
        super().__init__(reason)
        self.failure_class = failure_class
        self.reason = reason

    @classmethod
    def client(cls, detail: str) -> LaunchError:
        return cls(FailureClass.CLIENT_ERROR, f"ClientError: {detail}")

    @classmethod
    def infrastructure(cls, detail: str) -> LaunchError:
        return cls(FailureClass.INFRASTRUCTURE_ERROR, f"InfrastructureError: {detail}")


class RuntimeFailure(TransientNodeAgentError):
    """The runtime failed while a job ran (e.g. `docker wait` lost the daemon)."""
