"""AWS access keys: sealed at rest, issued and revoked safely from several processes at
once, and a key ring that leaves out what it cannot open instead of freezing."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from quartermaster.auth import Role, ShareRef
from quartermaster.auth.access_keys import AccessKeyError, AccessKeyFile, KeyRing


def _issue(directory: str, n: int) -> None:
    AccessKeyFile(directory).add(f"user-{n}", [Role.AUDITOR], now=time.time())


def test_the_secret_is_sealed_and_opens_with_its_key(tmp_path: Path) -> None:
    keys = AccessKeyFile(tmp_path)
    record, secret = keys.add("alice", [Role.MEMBER], [ShareRef("q", "a")], now=1.0)
    assert secret not in keys.path.read_text()  # only sealed at rest
    assert keys.secret_of(record) == secret
    assert KeyRing(tmp_path).lookup(record.access_key_id) == (
        secret.encode(),
        record.principal(),
    )
    with pytest.raises(AccessKeyError, match="member key needs"):
        keys.add("bob", [Role.MEMBER], now=1.0)


def test_keys_issued_at_once_by_several_processes_are_all_kept(tmp_path: Path) -> None:
    """The file is read, changed and replaced under a lock, through a temporary file of
    each writer's own, and the seal key is made once: no issued key is lost, every one
    opens (before: 8 issued, 3 to 6 kept, some sealed with a seal key that was lost)."""
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_issue, args=(str(tmp_path), n)) for n in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    records = AccessKeyFile(tmp_path).records()
    assert sorted(r.subject for r in records) == [f"user-{n}" for n in range(8)]
    ring = KeyRing(tmp_path)
    assert all(ring.lookup(r.access_key_id) is not None for r in records)


def test_a_record_that_cannot_be_opened_does_not_keep_a_revoked_key(tmp_path: Path) -> None:
    keys = AccessKeyFile(tmp_path)
    kept, _ = keys.add("kept", [Role.ADMIN], now=1.0)
    revoked, _ = keys.add("revoked", [Role.ADMIN], now=1.0)
    ring = KeyRing(tmp_path)
    assert ring.lookup(revoked.access_key_id) is not None
    other = tmp_path / "other"  # a record sealed under another seal key, copied in
    stranger, _ = AccessKeyFile(other).add("stranger", [Role.ADMIN], now=1.0)
    keys.revoke(revoked.access_key_id)
    text = keys.path.read_text()
    keys.path.write_text(
        text.replace("]}", "," + AccessKeyFile(other).path.read_text().split("[", 1)[1][:-3] + "]}")
    )
    assert {r.subject for r in keys.records()} == {"kept", "stranger"}
    time.sleep(0.01)
    assert ring.lookup(revoked.access_key_id) is None  # the revocation still applies
    assert ring.lookup(kept.access_key_id) is not None
    assert ring.lookup(stranger.access_key_id) is None  # left out: not our seal key
