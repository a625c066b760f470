"""Errors of the audit tools: one base, split into permanent and transient."""

from __future__ import annotations


class AuditError(Exception):
    """Base error of `quartermaster.audit`."""


class PermanentAuditError(AuditError):
    """The input is wrong (a bad file, an unknown job); retrying changes nothing."""


class TransientAuditError(AuditError):
    """The log could not be reached; the same command may succeed later."""


class LogUnreachableError(TransientAuditError):
    """No server of the bus answered, or none let this user in, within the deadline."""


class LogFileError(PermanentAuditError):
    """A log file is unreadable or not in a known form."""


class ConfigError(PermanentAuditError):
    """A simulation configuration or trace names a field wrongly; the message says which."""
