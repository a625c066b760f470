"""Test support: pytest fixtures with real servers.

Use `pytest_plugins = ["quartermaster.testing.servers"]` in a conftest.
"""
