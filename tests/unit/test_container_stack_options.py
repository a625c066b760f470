"""Options of `quartermaster.testing.containers.QuartermasterStack` checked before any container."""

from __future__ import annotations

import pytest

from quartermaster.testing.container_parts import StackStartError, free_ports, numeric_user
from quartermaster.testing.containers import QuartermasterStack


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"runtime": "podman"}, "runtime='podman': use one of process, docker"),
        ({"extra_env": {"admision": {}}}, "unknown parts ['admision']"),
        ({"nodes": 0}, "at least 1 each"),
        ({"schedulers": 0}, "at least 1 each"),
    ],
)
def test_bad_options_are_refused_by_name(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        QuartermasterStack(**options)  # type: ignore[arg-type]


def test_secure_means_nats_users_unless_told_otherwise() -> None:
    assert QuartermasterStack().nats_users
    assert not QuartermasterStack(secure=False).nats_users
    assert not QuartermasterStack(nats_users=False).nats_users


def test_a_stack_that_never_started_stops_cleanly() -> None:
    stack = QuartermasterStack()
    stack.stop()
    stack.stop()
    assert stack.containers == {}


@pytest.mark.parametrize(
    ("user", "ids"), [("10001:10001", (10001, 10001)), ("999", (999, 999)), ("", (0, 0))]
)
def test_an_image_user_is_read_as_numbers(user: str, ids: tuple[int, int]) -> None:
    assert numeric_user(user, "img") == ids


def test_an_image_user_given_by_name_is_refused() -> None:
    with pytest.raises(StackStartError, match="img runs as user 'qm'"):
        numeric_user("qm", "img")


def test_free_ports_are_distinct() -> None:
    ports = free_ports(20)
    assert len(set(ports)) == 20


def test_free_ports_with_an_offset_have_that_port_free_too() -> None:
    import socket

    ports = free_ports(4, offset=10000)
    assert len(set(ports)) == 4
    for port in ports:
        assert port + 10000 <= 65535
        with socket.socket() as s:
            s.bind(("127.0.0.1", port + 10000))


def test_the_store_s_access_needs_a_started_stack() -> None:
    stack = QuartermasterStack()
    with pytest.raises(RuntimeError, match="not started"):
        _ = stack.s3_access
    assert stack.role_arn == "arn:aws:iam::000000000000:role/quartermaster"
    assert QuartermasterStack(extra_env={"seaweedfs": {"S3_REGION": "eu-west-1"}}).extra_env
