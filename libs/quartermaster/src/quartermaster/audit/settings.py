"""Where the audit tools find the live log: the bus settings, read from `QM_AUDIT_*`.

Command-line flags override them; everything else about the tools is per command.
"""

from __future__ import annotations

from collections.abc import Mapping

from quartermaster.bus.access import BusSettings
from quartermaster.envsettings import from_env

ENV_PREFIX = "QM_AUDIT_"


class AuditSettings(BusSettings, frozen=True, kw_only=True):
    """`QM_AUDIT_NATS_URL`, `QM_AUDIT_STREAM`, `QM_AUDIT_SUBJECT_PREFIX`, credentials, TLS."""


def audit_settings(environ: Mapping[str, str] | None = None) -> AuditSettings:
    return from_env(AuditSettings, ENV_PREFIX, environ)
