"""Subjects of the log. Everything lives in one stream, read in one order by all.

- `qm.requests`            admission: configuration and job requests
- `qm.decisions.<queue>`   the scheduler leading that queue (fenced per subject)
- `qm.decisions._hosts`    host liveness decisions (any scheduler, deduplicated)
- `qm.reports.<host>`      a node agent: registration, heartbeats, attempt reports
- `qm.timers`              the warm-pool service: clock ticks at due times

Which event kinds each family may carry is `quartermaster.core.provenance`.
"""

from __future__ import annotations

from quartermaster.core.provenance import HOSTS_TOKEN, token

PREFIX = "qm"


def requests(prefix: str = PREFIX) -> str:
    return f"{prefix}.requests"


def decisions(queue: str, prefix: str = PREFIX) -> str:
    return f"{prefix}.decisions.{token(queue)}"


def host_decisions(prefix: str = PREFIX) -> str:
    return f"{prefix}.decisions.{HOSTS_TOKEN}"


def reports(host: str, prefix: str = PREFIX) -> str:
    return f"{prefix}.reports.{token(host)}"


def timers(prefix: str = PREFIX) -> str:
    return f"{prefix}.timers"


__all__ = ["PREFIX", "decisions", "host_decisions", "reports", "requests", "timers", "token"]
