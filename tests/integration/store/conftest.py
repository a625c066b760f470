"""Fixtures of the read-model tests: an asyncpg pool on a fresh database, a schema each.

The servers come from `quartermaster.testing.servers`, which the top-level
`tests/conftest.py` loads (`pytest_plugins` is honoured only there).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import pytest_asyncio

_numbers = itertools.count(1)


@pytest.fixture
def schema_name(request: pytest.FixtureRequest) -> str:
    """A schema of this test's own: `rm<n>_<test name>`, within the 48-character limit."""
    name = re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    return f"rm{next(_numbers)}_{name}"[:48].rstrip("_")


@pytest_asyncio.fixture
async def pg_pool(pg_dsn: str) -> AsyncIterator[Any]:
    pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=8)
    try:
        yield pool
    finally:
        await pool.close()
