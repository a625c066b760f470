"""Many-host runs: select them with `-m multihost` (or leave them out with `-m "not multihost"`)."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "multihost: spreads the system over network namespaces (root, iproute2)"
    )
