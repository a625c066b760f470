"""Leases judged on each contender's clock (a fake one here): held while renewed,
taken over after a silence of one TTL, never before; the silent holder knows it."""

from __future__ import annotations

from typing import Any

import pytest

from quartermaster.bus import JetStreamLog, KvLease


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_renewed_lease_stays_and_a_silent_one_passes_after_one_ttl(
    jetstream_log: JetStreamLog,
) -> None:
    bucket = f"LEASES_{jetstream_log.stream}"
    holder_clock, standby_clock = Clock(), Clock()
    holder = await KvLease.open(jetstream_log, bucket, max_ttl_s=60, clock=holder_clock)
    standby = await KvLease.open(jetstream_log, bucket, max_ttl_s=60, clock=standby_clock)
    try:
        assert await holder.acquire("q", "a-1", ttl_s=5)
        assert not await standby.acquire("q", "b-1", ttl_s=5)  # starts counting silence

        for _ in range(3):  # renewed every 4 s: a standby never sees 5 s of silence
            holder_clock.now += 4
            standby_clock.now += 4
            assert await holder.renew("q")
            assert not await standby.acquire("q", "b-1", ttl_s=5)
            assert holder.held("q")

        standby_clock.now += 4.9  # the holder went silent; not yet one TTL
        holder_clock.now += 4.9
        assert not await standby.acquire("q", "b-1", ttl_s=5)
        holder_clock.now += 0.2
        assert not holder.held("q"), "a holder must stop leading once its TTL ran out"
        standby_clock.now += 0.2
        assert await standby.acquire("q", "b-1", ttl_s=5)

        assert await standby.holder("q") == "b-1"
        assert not await holder.renew("q")  # it cannot take the lease back by renewing
        assert not await holder.acquire("q", "a-1", ttl_s=5)  # nor by asking again
    finally:
        await jetstream_log.js.delete_key_value(bucket)


async def test_a_released_lease_is_taken_at_once(jetstream_log: JetStreamLog) -> None:
    bucket = f"LEASES_{jetstream_log.stream}"
    holder = await KvLease.open(jetstream_log, bucket, max_ttl_s=60, clock=Clock())
    standby = await KvLease.open(jetstream_log, bucket, max_ttl_s=60, clock=Clock())
    try:
        assert await holder.acquire("q", "a-1", ttl_s=5)
        assert not await standby.acquire("q", "b-1", ttl_s=5)
        assert await holder.release("q")
        assert await standby.acquire("q", "b-1", ttl_s=5)  # no silence to wait out
    finally:
        await jetstream_log.js.delete_key_value(bucket)


async def test_a_standby_that_saw_the_lease_held_checks_it_with_one_read(
    jetstream_log: JetStreamLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create it would lose is not tried again: one request per check, not two."""
    bucket = f"LEASES_{jetstream_log.stream}"
    holder = await KvLease.open(jetstream_log, bucket, max_ttl_s=60, clock=Clock())
    standby = await KvLease.open(jetstream_log, bucket, max_ttl_s=60, clock=Clock())
    creates: list[str] = []
    create = standby._kv.create

    async def counted_create(key: str, value: bytes, **options: Any) -> int:
        creates.append(key)
        return await create(key, value, **options)

    monkeypatch.setattr(standby._kv, "create", counted_create)
    try:
        assert await holder.acquire("q", "a-1", ttl_s=5)
        for _ in range(3):
            assert not await standby.acquire("q", "b-1", ttl_s=5)
        assert creates == ["q"]  # the first check only
        assert await holder.release("q")
        assert await standby.acquire("q", "b-1", ttl_s=5)  # released: taken by the read's revision
        assert creates == ["q"]
        assert await holder.holder("q") == "b-1"
        assert await standby.acquire("r", "b-1", ttl_s=5)  # a key never seen held: created
        assert creates == ["q", "r"]
    finally:
        await jetstream_log.js.delete_key_value(bucket)
