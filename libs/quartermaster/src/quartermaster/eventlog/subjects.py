"""Subjects of the log. Everything lives in one stream, read in one order by all.

- `qm.requests`            admission: configuration and job requests
- `qm.decisions.<queue>`   the scheduler leading that queue (fenced per subject)
- `qm.decisions._hosts`    host liveness decisions (any scheduler, deduplicated)
- `qm.reports.<host>`      a node agent: registration, heartbeats, attempt reports
- `qm.timers`              the warm-pool service: clock ticks at due times
"""

from __future__ import annotations

PREFIX = "qm"


def requests(prefix: str = PREFIX) -> str:
    return f"{prefix}.requests"


def decisions(queue: str, prefix: str = PREFIX) -> str:
    return f"{prefix}.decisions.{token(queue)}"


def host_decisions(prefix: str = PREFIX) -> str:
    return f"{prefix}.decisions._hosts"


def reports(host: str, prefix: str = PREFIX) -> str:
    return f"{prefix}.reports.{token(host)}"


def timers(prefix: str = PREFIX) -> str:
    return f"{prefix}.timers"


def token(name: str) -> str:
    """A subject token for a name: names allow [A-Za-z0-9_-], which NATS accepts as is."""
    return name.replace(".", "_").replace("*", "_").replace(">", "_") or "_"
