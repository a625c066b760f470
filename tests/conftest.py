"""Shared fixtures: real nats-server and Postgres (see quartermaster.testing.servers).

pytest only honours `pytest_plugins` in this top-level conftest; subfolders
must not declare it again.
"""

pytest_plugins = ["quartermaster.testing.servers"]
