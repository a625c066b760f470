"""`qm up` on a secured bus: its embedded nats-server lets in only its services' users.

The stack embeds the server (no `nats_url`), as `qm up` does by default, so every
service connects as its own NATS user with the permissions of its role.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import stat

import msgspec
import nats
import nats.errors
import pytest
from conftest import StackFactory
from test_seed_scenario_e2e import test_seed_scenario_through_grpc as play_seed_scenario

from quartermaster.eventlog import subjects
from quartermaster_stack.stack import Stack
from quartermaster_stack.thread import StackThread


def test_the_seed_scenario_plays_on_a_secured_bus(make_stack: StackFactory) -> None:
    started: list[StackThread] = []

    def embedded(**fields: object) -> StackThread:
        started.append(make_stack(nats_url=None, **fields))
        return started[-1]

    play_seed_scenario(embedded)

    stack = started[0].stack
    assert stack.nats_passwords is not None
    directory = stack.nats_passwords.directory
    assert stat.S_IMODE(os.stat(directory / "node.node-1.password").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(directory / "nats-server.conf").st_mode) == 0o600
    asyncio.run(_refused(stack))
    for part in ("scheduler", "node-1"):  # a part restarted on its own logs in again
        started[0].restart(part)


async def _refused(stack: Stack) -> None:
    """No anonymous client gets in, nor one with a password but no certificate of the
    stack's CA (mutual TLS); node-1's user cannot write decisions."""
    refused = (nats.errors.NoServersError, nats.errors.Error, ssl.SSLError, OSError)
    assert stack.nats_url.startswith("tls://")
    with pytest.raises(refused):
        await nats.connect(stack.nats_url, max_reconnect_attempts=0, allow_reconnect=False)
    creds = stack.nats_credentials("node-1")
    no_cert = msgspec.structs.replace(creds, tls_cert="", tls_key="")
    with pytest.raises(refused):
        await nats.connect(
            stack.nats_url,
            max_reconnect_attempts=0,
            allow_reconnect=False,
            **no_cert.connect_options(),
        )
    errors: list[str] = []

    async def on_error(err: Exception) -> None:
        errors.append(str(err).lower())

    options = stack.nats_credentials("node-1").connect_options()
    nc = await nats.connect(stack.nats_url, error_cb=on_error, max_reconnect_attempts=0, **options)
    subject = subjects.decisions("q", stack.settings.subject_prefix)
    try:
        await nc.publish(subject, b"forged")
        await nc.flush()
        for _ in range(250):
            if errors:
                break
            await asyncio.sleep(0.02)
    finally:
        await nc.close()
    assert any(f'violation for publish to "{subject}"' in e for e in errors), errors
