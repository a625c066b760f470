"""A bus only trusted producers can write, on a real nats-server with one user per role.

Forged writes (core NATS and JetStream publishes, JetStream API calls, consumers
delivering elsewhere) by a user outside a subject's family are refused by the
server; each service, run as its own user, does everything its role needs; and an
event that reaches the log on the wrong subject all the same (written by the admin
user) is ignored by the readers' fold.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, RePublish, StreamConfig

from qm_admission.writer import Plan, RequestWriter
from qm_node_agent import NodeAgent, NodeSettings, RuntimeKind
from qm_scheduler.service import Scheduler
from qm_scheduler.settings import SchedulerSettings
from qm_scheduler.snapshots import SnapshotStore
from qm_warmpool.service import WarmPoolService
from qm_warmpool.settings import WarmPoolSettings
from quartermaster import events as ev
from quartermaster.auth import pki
from quartermaster.bus import JetStreamLog, PermanentBusError
from quartermaster.bus.access import NatsCredentials
from quartermaster.bus.feed import fast_subject, feed_stream, feed_subject
from quartermaster.bus.liveness import Beat, LivenessWatch, beat_subject, send_beat
from quartermaster.cancelling import cancel_and_wait
from quartermaster.core import JobStatus, State
from quartermaster.embedded.errors import EmbeddedServerError
from quartermaster.embedded.nats_auth import BusLayout, TlsFiles
from quartermaster.eventlog import LogFollower, encode_batch, process, subjects
from quartermaster.eventlog.host_feed import HostView, encode_view
from quartermaster.eventlog.host_reader import HostFeedFollower
from quartermaster.eventlog.host_relay import HostRelay
from quartermaster.testing.servers import SecuredBus, start_secured_bus, unavailable

UNIT = "ml.g5.xlarge"
QUEUE = "q"
SHARE = "QS1"
FORGED = encode_batch([ev.JobDispatched(at=1.0, job_id="forged", attempt=1, hosts=("h1",))])


def refusals(subject: str, errors: list[str], action: str = "publish") -> list[str]:
    """The server's permission violations for `action` (publish, subscription) on
    `subject` (nats-py lowercases them)."""
    expected = f'permissions violation for {action} to "{subject}"'.lower()
    return [e for e in errors if expected in e.lower()]


@contextlib.asynccontextmanager
async def raw(bus: SecuredBus, user: str) -> AsyncIterator[tuple[NatsClient, list[str]]]:
    """A plain nats-py connection as `user`, and the errors the server sent it."""
    errors: list[str] = []

    async def on_error(err: Exception) -> None:
        errors.append(str(err))

    who = bus.credentials(user)
    options = {**who.connect_options(), "inbox_prefix": who.inbox_prefix()}
    nc = await nats.connect(bus.url, error_cb=on_error, max_reconnect_attempts=0, **options)
    try:
        yield nc, errors
    finally:
        await nc.close()


async def until(what: str, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        await asyncio.sleep(0.02)


async def until_refused(
    subject: str, errors: list[str], times: int = 1, action: str = "publish"
) -> None:
    await until(
        f"{times} refusal(s) of {action} to {subject}",
        lambda: len(refusals(subject, errors, action)) >= times,
    )


# ---- the server refuses ------------------------------------------------------------


async def test_a_publish_outside_the_users_family_is_refused(secured_bus: SecuredBus) -> None:
    bus, p = secured_bus, secured_bus.layout.subject_prefix
    forgeries = [
        ("node.h1", subjects.decisions(QUEUE, p)),
        ("node.h1", subjects.host_decisions(p)),
        ("node.h1", subjects.requests(p)),
        ("node.h1", subjects.reports("h2", p)),
        ("node.h1", subjects.timers(p)),
        ("admission", subjects.decisions(QUEUE, p)),
        ("admission", subjects.reports("h1", p)),
        ("warmpool", subjects.requests(p)),
        ("scheduler", subjects.requests(p)),
        ("scheduler", subjects.reports("h1", p)),
        ("scheduler", subjects.timers(p)),
        ("auditor", subjects.requests(p)),
        ("auditor", subjects.reports("h1", p)),
    ]
    async with await bus.connect(bus.ADMIN) as admin:
        for user, subject in forgeries:
            async with raw(bus, user) as (nc, errors):
                await nc.publish(subject, FORGED)  # core NATS: the stream would capture it
                await nc.flush()
                with pytest.raises(nats.errors.TimeoutError):  # JetStream: no ack comes
                    await nc.jetstream(timeout=0.25).publish(subject, FORGED)
                await until_refused(subject, errors, times=2)
        assert await admin.last_seq() == 0, "a forged message was stored"


async def test_a_node_agent_beats_only_on_its_own_key(secured_bus: SecuredBus) -> None:
    """Heartbeats live in the liveness bucket: agent h1 may keep h1 alive, never h2."""
    bus, stream = secured_bus, secured_bus.layout.stream
    async with raw(bus, "node.h1") as (nc, errors):
        await send_beat(nc.jetstream(), stream, Beat(host_id="h1", at=1.0))
        with pytest.raises(nats.errors.TimeoutError):  # no ack: not stored
            await nc.jetstream(timeout=0.25).publish(beat_subject(stream, "h2"), FORGED)
        await until_refused(beat_subject(stream, "h2"), errors, times=1)
    async with await bus.connect(bus.ADMIN) as admin:
        watch = LivenessWatch(admin.nc, admin.js, stream)
        await watch.start()
        try:
            await until("the bucket read", lambda: watch.ready)
            assert watch.signs == {"h1": 1.0}
        finally:
            await watch.stop()


async def test_a_user_reads_only_its_own_replies(secured_bus: SecuredBus) -> None:
    """Acks, API answers and consumer deliveries go to `_INBOX_<user>`: no other user
    may listen there, so none learns another's consumers (to delete them) or leases."""
    bus = secured_bus
    async with raw(bus, "node.h1") as (nc, errors):
        for subject in ("_INBOX.>", "_INBOX_scheduler.>", ">"):
            await nc.subscribe(subject)
            await nc.flush()
            await until_refused(subject, errors, action="subscription")
    async with await bus.connect("node.h1") as node:  # its own inboxes work
        seq = await node.append(subjects.reports("h1", bus.layout.subject_prefix), b"")
        assert seq == 1
    async with await bus.connect("auditor") as auditor:
        assert [e.seq async for e in auditor.read(1, 1)] == [1]


async def test_a_node_agent_reads_only_its_own_hosts_views(secured_bus: SecuredBus) -> None:
    """Node agent h1 reads h1's views from the feed; it can neither read the log, nor
    open a consumer on h2's views, nor write a view (the scheduler's)."""
    bus, layout, p = secured_bus, secured_bus.layout, secured_bus.layout.subject_prefix
    feed = feed_stream(layout.stream)
    async with await bus.connect(bus.ADMIN) as admin:
        for host, seq in (("h1", 5), ("h2", 7)):
            view = encode_view(HostView(seq=seq, host_id=host))
            await admin.js.publish(feed_subject(host, p), view, stream=feed)
    async with await bus.connect("node.h1") as node:
        follower = HostFeedFollower(node, "h1")
        await follower.start()
        try:
            await follower.catch_up()
            assert follower.seq == 5
        finally:
            await follower.stop()
    async with raw(bus, "node.h1") as (nc, errors):
        js = nc.jetstream(timeout=0.5)
        inbox = nc.new_inbox()
        attempts = [
            (feed, f"$JS.API.CONSUMER.CREATE.{feed}.peek.{feed_subject('h2', p)}", "peek"),
            (layout.stream, f"$JS.API.CONSUMER.CREATE.{layout.stream}.peek.{p}.>", "peek"),
            (layout.stream, f"$JS.API.CONSUMER.CREATE.{layout.stream}", None),
        ]
        for stream, refused, name in attempts:
            config = ConsumerConfig(
                name=name,
                deliver_subject=inbox,
                filter_subject=feed_subject("h2", p) if stream == feed else f"{p}.>",
                ack_policy=AckPolicy.NONE,
            )
            with pytest.raises(nats.errors.TimeoutError):
                await js.add_consumer(stream, config=config)
            await until_refused(refused, errors)
        forged = encode_view(HostView(seq=99, host_id="h1"))
        with pytest.raises(nats.errors.TimeoutError):
            await js.publish(feed_subject("h1", p), forged)
        await until_refused(feed_subject("h1", p), errors)
        # The unstored copy of each view: h1 may read its own, not h2's, and write none.
        await nc.subscribe(fast_subject("h2", p))
        await until_refused(fast_subject("h2", p), errors, action="subscription")
        await nc.publish(fast_subject("h1", p), forged)
        await until_refused(fast_subject("h1", p), errors)


async def test_a_view_sent_at_once_reaches_its_agent_before_the_feed_and_once(
    secured_bus: SecuredBus,
) -> None:
    """The scheduler's unstored copy of a view reaches node h1 (no feed message needed);
    the feed's copy of the same view is then applied no second time."""
    bus, layout, p = secured_bus, secured_bus.layout, secured_bus.layout.subject_prefix
    heard: list[int] = []
    async with await bus.connect("node.h1") as node:
        follower = HostFeedFollower(node, "h1")
        follower.listen(lambda seq, _subject, _events: heard.append(seq))
        await follower.start()
        try:
            view = encode_view(HostView(seq=3, host_id="h1"))
            async with await bus.connect("scheduler") as scheduler:
                await scheduler.nc.publish(fast_subject("h1", p), view)
                await scheduler.nc.flush()
                await follower.wait_for(3)
                assert heard == [3]
                await scheduler.js.publish(
                    feed_subject("h1", p), view, stream=feed_stream(layout.stream)
                )
            await follower.catch_up()
            assert follower.feed_seq >= 1 and heard == [3]
        finally:
            await follower.stop()


async def test_no_service_may_change_purge_or_delete_the_stream(secured_bus: SecuredBus) -> None:
    bus = secured_bus
    stream, p = bus.layout.stream, bus.layout.subject_prefix
    widened = {"name": stream, "subjects": [f"{p}.>", "elsewhere.>"], "storage": "file"}
    republisher = {
        "name": "EVIL",
        "subjects": ["evil.>"],
        "republish": {"src": ">", "dest": subjects.requests(p)},
    }
    calls = [
        (f"$JS.API.STREAM.UPDATE.{stream}", widened),
        (f"$JS.API.STREAM.PURGE.{stream}", {}),
        (f"$JS.API.STREAM.MSG.DELETE.{stream}", {"seq": 1}),
        (f"$JS.API.STREAM.DELETE.{stream}", None),
        ("$JS.API.STREAM.CREATE.EVIL", republisher),
    ]
    async with await bus.connect(bus.ADMIN) as admin:
        seq = await admin.append(subjects.requests(p), encode_batch([]))
        for user in ("scheduler", "admission", "warmpool", "node.h1", "auditor"):
            async with raw(bus, user) as (nc, errors):
                for subject, body in calls:
                    data = json.dumps(body).encode() if body is not None else b""
                    await nc.publish(subject, data, reply=nc.new_inbox())
                    await nc.flush()
                    await until_refused(subject, errors)
        info = await admin.js.stream_info(stream)
        assert info.config.subjects == [f"{p}.>"]
        assert info.state.last_seq == seq and info.state.messages == 1
        with pytest.raises(nats.js.errors.NotFoundError):
            await admin.js.stream_info("EVIL")


async def test_the_scheduler_cannot_reconfigure_its_buckets(secured_bus: SecuredBus) -> None:
    """Its buckets exist (the bootstrap made them); a create with another config fails."""
    bus, p = secured_bus, secured_bus.layout.subject_prefix
    kv = f"KV_{bus.layout.lease_bucket}"
    async with await bus.connect("scheduler") as scheduler:
        rewired = StreamConfig(
            name=kv,
            subjects=[f"$KV.{bus.layout.lease_bucket}.>"],
            republish=RePublish(src=f"$KV.{bus.layout.lease_bucket}.*", dest=subjects.requests(p)),
        )
        with pytest.raises(nats.js.errors.BadRequestError) as refused:
            await scheduler.js.add_stream(rewired)
        assert refused.value.err_code == 10058  # a stream with this name exists
        assert (await scheduler.js.stream_info(kv)).config.republish is None


async def test_a_consumer_cannot_deliver_into_the_log_or_the_buckets(
    secured_bus: SecuredBus,
) -> None:
    bus, p, layout = secured_bus, secured_bus.layout.subject_prefix, secured_bus.layout
    own = subjects.reports("h1", p)
    # A reader that may create consumers on the log (node agents may not: they read their
    # host's feed) points their deliveries into the log and the buckets.
    async with (
        await bus.connect("node.h1") as node,
        await bus.connect("auditor") as reader,
        await bus.connect(bus.ADMIN) as admin,
    ):
        await node.append(own, b"crafted bytes")
        js = reader.js

        def push(deliver: str) -> ConsumerConfig:
            return ConsumerConfig(
                deliver_subject=deliver,
                deliver_policy=DeliverPolicy.ALL,
                ack_policy=AckPolicy.NONE,
                filter_subject=own,
            )

        with pytest.raises(nats.js.errors.BadRequestError):  # a cycle into its own stream
            await js.add_consumer(layout.stream, push(subjects.requests(p)))
        await js.add_consumer(layout.stream, push(f"$KV.{layout.lease_bucket}.{layout.stream}_q"))
        await js.add_consumer(layout.stream, push(f"$O.{layout.snapshot_bucket}.M.c2NoZWR1bGVy"))
        seen: list[str] = []  # a control consumer: deliveries do happen

        async def on_delivery(msg: Msg) -> None:
            seen.append(msg.subject)

        inbox = reader.nc.new_inbox()
        await reader.nc.subscribe(inbox, cb=on_delivery)
        await js.add_consumer(layout.stream, push(inbox))
        await until("the control delivery", lambda: bool(seen))
        await reader.nc.flush()
        for bucket in (f"KV_{layout.lease_bucket}", f"OBJ_{layout.snapshot_bucket}"):
            assert (await admin.js.stream_info(bucket)).state.messages == 0, bucket
        assert await admin.last_seq() == 1


async def test_an_unknown_user_or_a_wrong_password_is_refused_at_once(
    secured_bus: SecuredBus,
) -> None:
    """Refused for good: the adapter fails instead of retrying as it does for a server
    that is down (the guard below only keeps a regression from hanging the suite)."""
    for who in (
        NatsCredentials(),
        NatsCredentials(user="scheduler", password="guessed"),
        NatsCredentials(user="node.h9", password="any"),
    ):
        with pytest.raises(PermanentBusError, match=r"(?i)authorization violation"):
            await asyncio.wait_for(
                JetStreamLog.connect(
                    secured_bus.url,
                    secured_bus.layout.stream,
                    secured_bus.layout.subject_prefix,
                    credentials=who,
                    create_stream=False,
                ),
                60,
            )


# ---- each service does its job as itself ------------------------------------------


def _payload(script: str) -> str:
    algorithm = {
        "TrainingImage": "quartermaster/job-runner:test",
        "TrainingInputMode": "File",
        "ContainerEntrypoint": ["sh", "-c"],
        "ContainerArguments": [script],
    }
    return json.dumps(
        {
            "TrainingJobName": "test",
            "AlgorithmSpecification": algorithm,
            "RoleArn": "arn:aws:iam::123456789012:role/test",
            "ResourceConfig": {"InstanceType": UNIT, "InstanceCount": 1, "VolumeSizeInGB": 10},
            "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        }
    )


def _configuration(at: float) -> list[ev.Event]:
    limits = (ev.CapacityLimit(UNIT, 2),)
    return [
        ev.ServiceEnvironmentCreated(at=at, name="env", capacity_limits=limits),
        ev.SchedulingPolicyCreated(at=at, name="fifo"),
        ev.JobQueueCreated(at=at, name=QUEUE, service_environment="env", scheduling_policy="fifo"),
        ev.QuotaShareCreated(
            at=at,
            job_queue=QUEUE,
            name=SHARE,
            capacity_limits=limits,
            strategy=ev.SharingStrategy.LEND_AND_BORROW,
        ),
    ]


def _submitted(job_id: str, script: str, at: float, instance_type: str = UNIT) -> ev.JobSubmitted:
    return ev.JobSubmitted(
        at=at,
        job_id=job_id,
        job_name=job_id,
        job_queue=QUEUE,
        quota_share=SHARE,
        instance_type=instance_type,
        warm_pool_key=ev.WarmPoolKey(instance_type=instance_type),
        payload=_payload(script),
    )


def _node_settings(bus: SecuredBus, tmp: Path, host: str) -> NodeSettings:
    return NodeSettings(
        host_id=host,
        instance_type=UNIT,
        data_dir=tmp / f"agent-{host}",
        nats_url=bus.url,
        gpu_count=0,
        runtime=RuntimeKind.PROCESS,
        stream=bus.layout.stream,
        subject_prefix=bus.layout.subject_prefix,
        heartbeat_seconds=0.5,
        stop_grace_seconds=2.0,
        address="127.0.0.1",
        nats_credentials=bus.credentials(f"node.{host}"),
    )


class Audit:
    """The auditor's view: a follower of the whole log and the subject of every event."""

    def __init__(self, event_log: JetStreamLog) -> None:
        self.follower = LogFollower(event_log)
        self.seen: list[tuple[int, str, ev.AnyEvent]] = []
        self.follower.listen(self._seen)

    def _seen(self, seq: int, subject: str, events: list[ev.AnyEvent]) -> None:
        self.seen.extend((seq, subject, event) for event in events)

    @property
    def state(self) -> State:
        return self.follower.state

    def subjects_of(self, kind: type[ev.Event]) -> set[str]:
        return {subject for _, subject, event in self.seen if isinstance(event, kind)}


@contextlib.asynccontextmanager
async def task(coro: Any) -> AsyncIterator[asyncio.Task[None]]:
    running = asyncio.create_task(coro)
    try:
        yield running
    finally:
        await cancel_and_wait(running)  # one cancel can be dropped (a 3.11 wait_for)


async def test_each_service_does_its_whole_role_as_its_own_user(
    secured_bus: SecuredBus, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bus, layout, p = secured_bus, secured_bus.layout, secured_bus.layout.subject_prefix
    scheduler_settings = SchedulerSettings(
        instance_id="s1",
        lease_bucket=layout.lease_bucket,
        snapshot_bucket=layout.snapshot_bucket,
        snapshot_every=1,
        nats_url=bus.url,
        stream=layout.stream,
        subject_prefix=p,
        nats_user="scheduler",
        nats_password=bus.credentials("scheduler").password,
    )
    logs = {user: await bus.connect(user) for user in ("admission", "scheduler", "warmpool")}
    logs["node.h1"] = await bus.connect("node.h1")
    logs["auditor"] = await bus.connect("auditor")
    try:
        audit = Audit(logs["auditor"])
        await audit.follower.start()
        admission_follower = LogFollower(logs["admission"])
        await admission_follower.start()
        writer = RequestWriter(logs["admission"], admission_follower)

        async def request(*events: ev.Event) -> int:
            written = await writer.write(lambda _state, _now: Plan(events=list(events), result=0))
            return written.seq

        scheduler = Scheduler(scheduler_settings, logs["scheduler"])
        warmpool = WarmPoolService(WarmPoolSettings(tick_seconds=0.2), logs["warmpool"])
        agent = NodeAgent(_node_settings(bus, tmp_path, "h1"), logs["node.h1"])
        async with task(scheduler.run()), task(warmpool.run()), agent:
            await request(*_configuration(time.time()))
            await until("h1 registered", lambda: "h1" in audit.state.hosts)
            await request(_submitted("ok", "echo hello", time.time()))
            await until(
                "ok succeeded",
                lambda: (
                    "ok" in audit.state.jobs
                    and audit.state.jobs["ok"].status == JobStatus.SUCCEEDED
                ),
            )
            await until("a clock tick", lambda: bool(audit.subjects_of(ev.ClockTicked)))
            assert warmpool.follower.paced  # it reads the log in batches, by direct gets
            await until("the warm pool read the job", lambda: "ok" in warmpool.follower.state.jobs)
            assert scheduler.leadership is not None and scheduler.leadership.gained >= 1
        snapshots = await SnapshotStore.open(logs["scheduler"], layout.snapshot_bucket)
        snapshot = await snapshots.load()
        big = bytes(range(256)) * 16_000  # 4 MB: read back under flow control
        await snapshots.save(big)
        assert await snapshots.load() == big
    finally:
        await audit.follower.stop()
        await admission_follower.stop()
        for event_log in logs.values():
            await event_log.close()

    assert snapshot is not None, "the scheduler saved no snapshot"
    assert audit.subjects_of(ev.JobSubmitted) == {subjects.requests(p)}
    assert audit.subjects_of(ev.JobDispatched) == {subjects.decisions(QUEUE, p)}
    assert audit.subjects_of(ev.ClockTicked) == {subjects.timers(p)}
    assert audit.subjects_of(ev.JobSucceeded) == {subjects.reports("h1", p)}
    assert audit.subjects_of(ev.HostRegistered) == {subjects.reports("h1", p)}
    complaints = [r.getMessage() for r in caplog.records if "violation" in r.getMessage().lower()]
    assert complaints == []


async def test_a_service_started_on_its_own_logs_in_and_uses_the_stream_it_finds(
    secured_bus: SecuredBus, tmp_path: Path
) -> None:
    """How deployed services start (`process.connect`, an agent's own connection):
    with a user they must not create the stream, which the admin made already."""
    bus, layout = secured_bus, secured_bus.layout
    settings = WarmPoolSettings(
        nats_url=bus.url,
        stream=layout.stream,
        subject_prefix=layout.subject_prefix,
        nats_user="warmpool",
        nats_password=bus.credentials("warmpool").password,
    )
    async with await process.connect(settings, "qm-warmpool") as event_log:
        seq = await event_log.append(subjects.timers(layout.subject_prefix), encode_batch([]))
    agent = NodeAgent(_node_settings(bus, tmp_path, "h2"))  # connects by itself
    async with agent:
        await until("h2 ready", lambda: agent.ready)
    async with await bus.connect("auditor") as auditor:
        assert await auditor.last_seq() > seq


async def test_operators_bootstrap_a_deployment_with_the_module(secured_bus: SecuredBus) -> None:
    """`python -m quartermaster.eventlog.bootstrap`, as admin, makes stream and buckets."""
    bus = secured_bus
    env = {
        "PATH": os.environ.get("PATH", ""),
        "QM_BOOTSTRAP_NATS_URL": bus.url,
        "QM_BOOTSTRAP_NATS_USER": bus.ADMIN,
        "QM_BOOTSTRAP_NATS_PASSWORD": bus.credentials(bus.ADMIN).password,
        "QM_BOOTSTRAP_STREAM": "DEPLOYED",
        "QM_BOOTSTRAP_SUBJECT_PREFIX": "deployed",
        "QM_BOOTSTRAP_LEASE_BUCKET": "deployed-leases",
        "QM_BOOTSTRAP_SNAPSHOT_BUCKET": "deployed-snapshots",
    }
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "quartermaster.eventlog.bootstrap"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    async with await bus.connect(bus.ADMIN) as admin:
        assert (await admin.js.stream_info("DEPLOYED")).config.subjects == ["deployed.>"]
        for bucket in ("KV_deployed-leases", "OBJ_deployed-snapshots"):
            assert (await admin.js.stream_info(bucket)).config.name == bucket


# ---- the fold ignores what arrives on the wrong subject -----------------------------


async def test_a_dispatch_on_a_request_subject_is_not_obeyed(
    secured_bus: SecuredBus, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Written by admin (who may write anywhere), so only the readers' rule stands guard.

    The job needs an instance type no host has, so no scheduler would place it. The
    same dispatch on its queue's decision subject is obeyed (the control), and the
    agent's first report of the job comes after that control: the forged ones, earlier
    in the log, started nothing.
    """
    bus, p = secured_bus, secured_bus.layout.subject_prefix
    marker = tmp_path / "ran"
    now = time.time()
    job = _submitted("misfit", f"touch {marker}", now, instance_type="ml.p5.48xlarge")
    dispatched = ev.JobDispatched(at=now, job_id="misfit", attempt=1, hosts=("h1",))
    ghost = ev.HostRegistered(at=now, host_id="ghost", instance_type=UNIT)
    admin, reader = await bus.connect(bus.ADMIN), await bus.connect("auditor")
    node = await bus.connect("node.h1")
    audit = Audit(reader)
    await audit.follower.start()
    relay_follower = LogFollower(admin)  # the scheduler's part: h1's views, from its fold
    relay = HostRelay(relay_follower)
    await relay_follower.start()
    await relay.start()
    try:
        async with NodeAgent(_node_settings(bus, tmp_path, "h1"), node):
            await admin.append(subjects.requests(p), encode_batch(_configuration(now)))
            await until("h1 registered", lambda: "h1" in audit.state.hosts)
            await admin.append(subjects.requests(p), encode_batch([job]))
            caplog.clear()
            for subject in (subjects.requests(p), subjects.reports("h1", p)):
                await admin.append(subject, encode_batch([dispatched]))
            forged_last = await admin.append(subjects.reports("h1", p), encode_batch([ghost]))
            await audit.follower.wait_for(forged_last)
            assert audit.state.jobs["misfit"].attempt_no == 0
            assert "ghost" not in audit.state.hosts

            control = await admin.append(subjects.decisions(QUEUE, p), encode_batch([dispatched]))
            await until(
                "the control dispatch ran",
                lambda: audit.state.jobs["misfit"].status == JobStatus.SUCCEEDED,
            )
    finally:
        await relay.stop()
        await relay_follower.stop()
        await audit.follower.stop()
        for event_log in (admin, reader, node):
            await event_log.close()
    assert marker.exists()
    starts = [seq for seq, _, e in audit.seen if isinstance(e, ev.JobStarting)]
    assert starts and min(starts) > control > forged_last
    ignored = [r.getMessage() for r in caplog.records if "ignored event" in r.getMessage()]
    assert any("kind=job.dispatched" in m and "requests" in m for m in ignored), ignored
    assert any("kind=host.registered" in m and "'ghost'" in m for m in ignored), ignored


# ---- TLS ----------------------------------------------------------------------------


def mutual_tls_files(tmp_path: Path) -> tuple[TlsFiles, NatsCredentials]:
    """A CA, the server's certificate and a client's (as 'scheduler'), written to files."""
    now = dt.datetime.now(dt.UTC)
    ca = pki.new_ca("test CA", now)
    server = pki.issue_leaf(ca, "nats", now, server_names=["127.0.0.1", "localhost"])
    client = pki.issue_leaf(ca, "scheduler", now)
    files = {}
    for name, data in [
        ("ca.pem", ca.cert_pem),
        ("server.pem", server.cert_pem),
        ("server-key.pem", server.key_pem),
        ("client.pem", client.cert_pem),
        ("client-key.pem", client.key_pem),
    ]:
        files[name] = tmp_path / name
        files[name].write_bytes(data)
    server_tls = TlsFiles(
        cert_file=str(files["server.pem"]),
        key_file=str(files["server-key.pem"]),
        ca_file=str(files["ca.pem"]),
        verify=True,
    )
    client_tls = NatsCredentials(
        tls_ca=str(files["ca.pem"]),
        tls_cert=str(files["client.pem"]),
        tls_key=str(files["client-key.pem"]),
    )
    return server_tls, client_tls


async def test_mutual_tls_lets_in_only_clients_with_a_certificate(tmp_path: Path) -> None:
    server_tls, client_tls = mutual_tls_files(tmp_path)
    layout = BusLayout(stream="TLS", subject_prefix="tls")
    try:
        bus = await start_secured_bus(
            tmp_path, layout, server_tls=server_tls, client_tls=client_tls
        )
    except EmbeddedServerError as err:
        unavailable("a nats-server with TLS", err)
    try:
        assert bus.url.startswith("tls://")
        async with await bus.connect("scheduler") as scheduler:
            seq = await scheduler.append(subjects.decisions(QUEUE, "tls"), encode_batch([]))
            assert seq == 1
        password = bus.credentials("scheduler").password
        no_certificate = NatsCredentials(
            user="scheduler", password=password, tls_ca=client_tls.tls_ca
        )
        for options in (
            no_certificate.connect_options(),
            {"user": "scheduler", "password": password},
        ):
            with pytest.raises((nats.errors.Error, OSError, ssl.SSLError)):
                await nats.connect(
                    bus.url.replace("tls://", "nats://"),
                    max_reconnect_attempts=0,
                    allow_reconnect=False,
                    connect_timeout=2,
                    **options,
                )
    finally:
        await asyncio.to_thread(bus.server.stop)


async def test_a_tls_connection_the_server_closes_logs_no_asyncio_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """nats-py upgrades with start_tls, so asyncio warned 'returning true from
    eof_received() has no effect when using ssl' at every close by the server: noise at
    each stop of a secured stack, services and benchmarks included."""
    server_tls, client_tls = mutual_tls_files(tmp_path)
    try:
        bus = await start_secured_bus(
            tmp_path,
            BusLayout(stream="TLS", subject_prefix="tls"),
            server_tls=server_tls,
            client_tls=client_tls,
        )
    except EmbeddedServerError as err:
        unavailable("a nats-server with TLS", err)
    caplog.set_level(logging.DEBUG, logger="asyncio")
    try:
        log = await bus.connect("scheduler")
    finally:
        await asyncio.to_thread(bus.server.stop)
    try:
        await until("the client to see the server go", lambda: not log.nc.is_connected)
    finally:
        await log.close()
    warnings = [r.getMessage() for r in caplog.records if r.name == "asyncio"]
    assert not any("eof_received()" in w for w in warnings), warnings
