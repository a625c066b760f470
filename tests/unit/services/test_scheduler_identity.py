"""Scheduler replicas get lease holder names that no other live process has."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from qm_scheduler import identity
from qm_scheduler.settings import SchedulerSettings
from quartermaster.envsettings import SettingsError


def test_two_replicas_on_one_host_get_different_holder_names() -> None:
    env = {"QM_SCHEDULER_INSTANCE_ID": "sched"}  # same name given to both (one image)
    first, second = SchedulerSettings.from_env(env), SchedulerSettings.from_env(env)
    assert first.holder_name != second.holder_name
    assert first.holder_name.startswith("sched-")


def test_the_default_name_is_the_host_name_plus_a_boot_id() -> None:
    import socket

    settings = SchedulerSettings.from_env({})
    assert settings.holder_name.startswith(socket.gethostname() + "-")
    assert settings.boot_id


def test_an_identity_file_keeps_the_name_across_restarts(tmp_path: Path) -> None:
    env = {"QM_SCHEDULER_IDENTITY_FILE": str(tmp_path / "id"), "QM_SCHEDULER_INSTANCE_ID": "s"}
    with identity.claim(SchedulerSettings.from_env(env)) as first:
        name = first.holder_name
    with identity.claim(SchedulerSettings.from_env(env)) as restarted:
        assert restarted.holder_name == name
    assert name.startswith("s-") and len(name) > 2


def _claim_in_child(path: str, answer: multiprocessing.Queue[str]) -> None:
    env = {"QM_SCHEDULER_IDENTITY_FILE": path}
    try:
        with identity.claim(SchedulerSettings.from_env(env)):
            answer.put("claimed")
    except identity.IdentityInUseError:
        answer.put("in use")


def test_a_second_live_process_cannot_share_the_identity(tmp_path: Path) -> None:
    path = str(tmp_path / "id")
    with identity.claim(SchedulerSettings.from_env({"QM_SCHEDULER_IDENTITY_FILE": path})):
        answer: multiprocessing.Queue[str] = multiprocessing.Queue()
        child = multiprocessing.Process(target=_claim_in_child, args=(path, answer))
        child.start()
        child.join(30)
        assert answer.get(timeout=5) == "in use"
    child = multiprocessing.Process(target=_claim_in_child, args=(path, answer))
    child.start()
    child.join(30)
    assert answer.get(timeout=5) == "claimed"  # the holder is gone: the lock went with it


@pytest.mark.parametrize(
    ("renew", "ttl"), [("0", "1.5"), ("1", "1.5"), ("-0.2", "1.5"), ("0.2", "0")]
)
def test_lease_timing_that_cannot_hold_is_refused_naming_the_variable(renew: str, ttl: str) -> None:
    env = {"QM_SCHEDULER_LEASE_RENEW_SECONDS": renew, "QM_SCHEDULER_LEASE_TTL_SECONDS": ttl}
    with pytest.raises(SettingsError, match=r"QM_SCHEDULER_.*lease_renew_seconds"):
        SchedulerSettings.from_env(env)
