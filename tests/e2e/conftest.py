"""End-to-end fixtures: a whole stack per test on the session's nats-server and Postgres."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qm_node_agent.leftovers import stop_process_jobs
from quartermaster.client import Quartermaster
from quartermaster.embedded.nats_server import EmbeddedNats
from quartermaster.embedded.postgres import EmbeddedPostgres
from quartermaster.testing.container_parts import remove_job_resources
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread

_numbers = itertools.count(1)
StackFactory = Callable[..., StackThread]


@pytest.fixture
def make_stack(
    nats_server: EmbeddedNats, postgres_server: EmbeddedPostgres, tmp_path: Path
) -> Iterator[StackFactory]:
    """Start a stack with its own stream, database and data dir; stopped after the test."""
    started: list[StackThread] = []

    def make(**fields: object) -> StackThread:
        n = next(_numbers)
        database = f"e2e_{n}_{tmp_path.name.lower()}"[:60]
        dsn = asyncio.run(postgres_server.create_database(database))
        settings = StackSettings(
            **{  # type: ignore[arg-type]
                "data_dir": tmp_path / f"stack{n}",
                "nats_url": nats_server.url,
                "postgres_url": dsn,
                "grpc_port": 0,
                "stream": f"E2E{n}_{tmp_path.name}"[:60],
                "subject_prefix": f"e2e{n}x{abs(hash(tmp_path.name)) % 10**6}",
                "stop_grace_seconds": 2.0,
                "heartbeat_seconds": 1.0,
                "tick_seconds": 1.0,
                "object_store": False,  # tests of the store ask for one (3 s to start)
                **fields,
            }
        )
        stack = StackThread(settings).__enter__()
        started.append(stack)
        return stack

    yield make
    for stack in started:
        settings = stack.stack.settings
        try:
            stack.__exit__()
        finally:
            # Jobs outlive their agents (a restarted agent adopts them); the test's must not.
            if settings.runtime == "docker":
                remove_job_resources(settings.data_dir, settings.stream)
            else:
                stop_process_jobs(settings.data_dir)


def client_for(stack: StackThread) -> Quartermaster:
    return Quartermaster(stack.address, timeout=20, credentials_dir=stack.credentials_dir)
