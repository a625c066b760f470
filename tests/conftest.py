"""Shared fixtures: real nats-server and Postgres (see quartermaster.testing.servers).

pytest only honours `pytest_plugins` in this top-level conftest; subfolders
must not declare it again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from quartermaster.testing.task_stacks import report_tasks

pytest_plugins = ["quartermaster.testing.servers"]

HANG_REPORT_BEFORE_TIMEOUT = 20.0  # seconds before pytest-timeout's limit


@pytest.fixture(autouse=True)
def hang_report(request: pytest.FixtureRequest) -> Iterator[None]:
    """Near pytest-timeout's limit, print where every asyncio task waits.

    pytest-timeout dumps only the threads' stacks, and a hung async test shows its
    loop idle in `select`: the tasks' own stacks (which await never returns) are
    what tells an intermittent hang's cause. Printed to stderr, which the failed
    test's report shows."""
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else _ini_timeout(request.config)
    if limit <= HANG_REPORT_BEFORE_TIMEOUT:
        yield
        return
    timer = threading.Timer(
        limit - HANG_REPORT_BEFORE_TIMEOUT, report_tasks, args=(request.node.nodeid,)
    )
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _ini_timeout(config: pytest.Config) -> float:
    try:
        return float(config.getini("timeout") or 0)
    except (ValueError, TypeError):
        return 0.0
