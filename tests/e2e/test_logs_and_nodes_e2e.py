"""`qm job logs` (and `--follow`) on a secured stack, drain across an agent restart and
undrain, and a second admission on a taken port refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from scenario import QUEUE, setup_queue, status, until

from quartermaster.auth import Role, ShareRef
from quartermaster.auth.local import LocalCredentials
from quartermaster.cli.jobs import submission
from quartermaster.cli.main import main as qm
from quartermaster.client import Quartermaster, QuartermasterError
from quartermaster.client.logs import job_logs
from quartermaster_stack.settings import StackSettings
from quartermaster_stack.thread import StackThread


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackThread]:
    """A stack as `qm up` starts it: TLS, tokens, one NATS user per service and host."""
    settings = StackSettings(
        data_dir=tmp_path_factory.mktemp("logs") / "data",
        nodes=2,
        grpc_port=0,
        stop_grace_seconds=2,
        heartbeat_seconds=1,
        tick_seconds=1,
    )
    with StackThread(settings) as stack:
        admin = Quartermaster(stack.address, credentials_dir=stack.credentials_dir)
        setup_queue(
            admin,
            2,
            [("A", 1, "LEND_AND_BORROW", None, False), ("B", 1, "LEND_AND_BORROW", None, False)],
        )
        admin.close()
        yield stack


def submit(c: Quartermaster, name: str, share: str, script: str) -> str:
    """Submit `sh -c script` as `qm job submit` does; returns the job id."""
    fields = {"queue": QUEUE, "share": share, "name": name, "command": ["sh", "-c", script]}
    return str(c.call(c.jobs.SubmitServiceJob, submission(fields)).job_id)


def cli(stack: StackThread) -> list[str]:
    return ["--address", stack.address, "--credentials", str(stack.credentials_dir)]


def test_logs_of_an_ended_attempt_are_kept_and_printed(
    secured: StackThread, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    c = Quartermaster(secured.address, credentials_dir=secured.credentials_dir)
    script = "for i in 1 2 3; do echo out-$i; done; echo err-line >&2; exit 3"
    job_id = submit(c, "noisy", "A", script)
    until("failed", lambda: status(c, job_id) == "FAILED")
    # the agent forgets the attempt once the log says it ended; its output stays
    capsysbinary.readouterr()
    assert qm([*cli(secured), "job", "logs", job_id]) == 0
    out = capsysbinary.readouterr().out
    assert out == b"out-1\nout-2\nout-3\nerr-line\n"
    assert qm([*cli(secured), "job", "logs", job_id, "--attempt", "1"]) == 0
    assert capsysbinary.readouterr().out == out
    assert qm([*cli(secured), "job", "logs", job_id, "--attempt", "7"]) == 1
    assert b"no attempt 7" in capsysbinary.readouterr().err
    c.close()


def test_follow_streams_new_output_until_the_attempt_ends(secured: StackThread) -> None:
    c = Quartermaster(secured.address, credentials_dir=secured.credentials_dir)
    go = Path(secured.stack.data_dir) / "go-follow"
    script = f"echo first; while [ ! -e {go} ]; do sleep 0.1; done; echo second"
    job_id = submit(c, "follower", "A", script)
    seen: list[bytes] = []
    done = threading.Event()

    def follow() -> None:
        for chunk in job_logs(c, job_id, follow=True, timeout=120):
            seen.append(chunk.data)
        done.set()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()  # before the job has an attempt: the stream waits for it
    until("first line streamed", lambda: b"".join(seen) == b"first\n")
    assert not done.is_set()  # the job still runs: the stream stays open
    go.touch()
    assert done.wait(60), "the stream did not end with the attempt"
    assert b"".join(seen) == b"first\nsecond\n"
    assert status(c, job_id) == "SUCCEEDED"
    c.close()


def test_a_member_reads_only_its_own_shares_logs(secured: StackThread) -> None:
    assert secured.credentials_dir is not None
    creds = LocalCredentials(secured.credentials_dir)
    admin = Quartermaster(secured.address, credentials_dir=secured.credentials_dir)
    job_id = submit(admin, "b-job", "B", "echo secret")
    until("b-job done", lambda: status(admin, job_id) == "SUCCEEDED")

    def member(share: str) -> Quartermaster:
        token = creds.issue(
            f"team-{share}",
            [Role.MEMBER],
            [ShareRef.parse(f"{QUEUE}/{share}")],
            issued_at=time.time(),
        )
        return Quartermaster(secured.address, token=token, ca_file=creds.ca)

    with pytest.raises(QuartermasterError) as err:
        list(job_logs(member("A"), job_id))
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert "jobs:logs:read" in err.value.details
    assert b"".join(c.data for c in job_logs(member("B"), job_id)) == b"secret\n"
    admin.close()


def test_a_drain_survives_an_agent_restart_until_undrained(make_stack, capsys) -> None:  # type: ignore[no-untyped-def]
    stack = make_stack(nodes=1)
    c = Quartermaster(stack.address, timeout=20, credentials_dir=stack.credentials_dir)
    setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    a = cli(stack)
    assert qm([*a, "nodes", "drain", "node-1"]) == 0
    stack.restart("node-1")  # the agent registers again
    capsys.readouterr()
    assert qm([*a, "nodes", "list", "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"][0]["state"] == "DRAINED"
    job_id = submit(c, "after-drain", "A", "exit 0")
    time.sleep(3)  # a few passes: nothing may place it on the drained host
    assert status(c, job_id) == "RUNNABLE"
    assert qm([*a, "nodes", "undrain", "node-1"]) == 0
    until("ran once undrained", lambda: status(c, job_id) == "SUCCEEDED")
    assert qm([*a, "nodes", "list"]) == 0
    assert "HEALTHY" in capsys.readouterr().out
    c.close()


def test_nodes_list_shows_heartbeats_that_never_enter_the_log(secured: StackThread) -> None:
    """Beats go to the liveness bucket (1 s here); admission, as its own NATS user,
    reads it for ListNodes: the last heartbeat moves on past the registration."""
    with Quartermaster(secured.address, credentials_dir=secured.credentials_dir) as c:
        first = {n.host_id: n.last_heartbeat_at for n in c.list_nodes()}
        assert set(first) == {"node-1", "node-2"} and all(first.values())
        until(
            "every node's heartbeat moves on",
            lambda: all(n.last_heartbeat_at > first[n.host_id] for n in c.list_nodes()),
            timeout=15,
        )


def test_a_second_admission_on_a_taken_port_is_refused(make_stack) -> None:  # type: ignore[no-untyped-def]
    first = make_stack(nodes=1)
    port = int(first.address.rsplit(":", 1)[1])
    with pytest.raises(RuntimeError) as err:
        make_stack(nodes=1, grpc_port=port)
    assert "failed to bind" in str(err.value.__cause__ or err.value).lower()
    with Quartermaster(first.address, credentials_dir=first.credentials_dir) as c:
        assert [n.host_id for n in c.list_nodes()] == ["node-1"]  # the first still answers


IMAGE = "quartermaster/job-runner:test"


@pytest.fixture
def docker() -> None:
    probe = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=30)
    if probe.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"docker runtime unavailable in CI: no image {IMAGE}")
        pytest.skip(f"no Docker engine or no image {IMAGE} (run scripts/bootstrap.sh as root)")


@pytest.mark.docker
def test_a_containers_output_is_followed_and_kept(make_stack, docker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    stack = make_stack(nodes=1, runtime="docker")
    c = Quartermaster(stack.address, timeout=20, credentials_dir=stack.credentials_dir)
    setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    # Docker captures stdout and stderr apart: lines written at once may swap.
    script = "echo one; sleep 0.5; echo two >&2; sleep 2; echo three"
    fields = {"queue": QUEUE, "share": "A", "name": "boxed", "image": IMAGE}
    request = submission(fields | {"command": ["sh", "-c", script]})
    job_id = str(c.call(c.jobs.SubmitServiceJob, request).job_id)
    streamed = b"".join(chunk.data for chunk in job_logs(c, job_id, follow=True, timeout=120))
    assert streamed == b"one\ntwo\nthree\n"
    until("succeeded", lambda: status(c, job_id) == "SUCCEEDED")
    until(  # the container is gone; its output was kept
        "kept", lambda: b"".join(ch.data for ch in job_logs(c, job_id)) == streamed
    )
    c.close()


def test_submit_many_in_chunks_then_wait_shows_progress(make_stack, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    stack = make_stack(nodes=1)
    c = Quartermaster(stack.address, timeout=20, credentials_dir=stack.credentials_dir)
    setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    c.close()
    file = tmp_path / "jobs.yaml"
    file.write_text(
        "".join(f"- name: many-{i}\n  command: [sh, -c, 'exit 0']\n" for i in range(5))
        + "- name: bad\n  share: nope\n  command: [sh]\n"
    )
    a = cli(stack)
    capsys.readouterr()
    flags = ["--queue", QUEUE, "--share", "A", "--chunk", "2", "--output", "json"]
    code = qm([*a, "job", "submit-many", str(file), *flags])
    out, err = capsys.readouterr()
    assert code == 1  # one submission was refused; the others went in
    submitted = json.loads(out)
    assert [s["jobName"] for s in submitted] == [f"many-{i}" for i in range(5)]
    assert "qm: error: bad:" in err and "submitted 5 of 6" in err
    last = submitted[-1]["jobId"]
    assert qm([*a, "job", "wait", last, "--timeout", "120"]) == 0
    out, err = capsys.readouterr()
    assert out == "SUCCEEDED\n"
    shown = err.splitlines()
    assert shown[-1] == "many-4: SUCCEEDED"  # each change on stderr as it happened
    assert qm([*a, "job", "list", QUEUE, "--status", "succeeded", "-o", "json"]) == 0
    listed = {j["jobName"] for j in json.loads(capsys.readouterr().out)["jobSummaryList"]}
    assert listed == {f"many-{i}" for i in range(5)}


def test_log_requests_that_cannot_be_served_say_why(make_stack) -> None:  # type: ignore[no-untyped-def]
    stack = make_stack(nodes=1)
    c = Quartermaster(stack.address, timeout=20, credentials_dir=stack.credentials_dir)
    setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    job_id = submit(c, "done", "A", "echo hi")
    until("done", lambda: status(c, job_id) == "SUCCEEDED")

    def refused(**fields: object) -> tuple[grpc.StatusCode, str]:
        with pytest.raises(QuartermasterError) as err:
            list(job_logs(c, **fields))  # type: ignore[arg-type]
        return err.value.code, err.value.details

    assert refused(job_id="nope")[0] == grpc.StatusCode.NOT_FOUND
    code, details = refused(job_id=job_id, host_id="node-9")
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "host_id" in details
    code, details = refused(job_id=job_id, attempt=-1)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "attempt" in details
    stack.stop_part("node-1")
    code, details = refused(job_id=job_id)
    assert code == grpc.StatusCode.UNAVAILABLE and "node-1" in details
    stack.start_part("node-1")  # the kept log is still there after the agent's restart

    def kept() -> bool:
        try:
            return b"".join(ch.data for ch in job_logs(c, job_id)) == b"hi\n"
        except QuartermasterError as err:  # until the agent listens again
            assert err.code == grpc.StatusCode.UNAVAILABLE, err
            return False

    until("kept", kept)
    c.close()


def test_logs_piped_into_a_reader_that_stops_early_end_quietly(secured: StackThread) -> None:
    c = Quartermaster(secured.address, credentials_dir=secured.credentials_dir)
    job_id = submit(c, "chatty", "A", "yes | head -c 3000000")
    until("chatty done", lambda: status(c, job_id) == "SUCCEEDED")
    c.close()
    logs = subprocess.Popen(
        [sys.executable, "-m", "quartermaster.cli.main", *cli(secured), "job", "logs", job_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert logs.stdout is not None
    assert logs.stdout.read(10) == b"y\ny\ny\ny\ny\n"
    logs.stdout.close()  # like `| head`
    assert logs.wait(60) == 0
    assert logs.stderr is not None and logs.stderr.read() == b""


def test_env_update_and_queue_update(make_stack, capsys) -> None:  # type: ignore[no-untyped-def]
    stack = make_stack(nodes=1)
    c = Quartermaster(stack.address, timeout=20, credentials_dir=stack.credentials_dir)
    setup_queue(c, 1, [("A", 1, "LEND_AND_BORROW", None, False)])
    c.close()
    a = cli(stack)
    assert qm([*a, "env", "update", "env", "--capacity", "ml.g5.xlarge=2"]) == 0
    capsys.readouterr()
    assert qm([*a, "env", "list", "-o", "json"]) == 0
    (env,) = json.loads(capsys.readouterr().out)["serviceEnvironments"]
    assert [lim["maxCapacity"] for lim in env["capacityLimits"]] == [2]
    assert qm([*a, "queue", "update", QUEUE, "--state", "disabled"]) == 0
    capsys.readouterr()
    assert qm([*a, "queue", "list", "-o", "json"]) == 0
    (queue,) = json.loads(capsys.readouterr().out)["jobQueues"]
    assert queue["state"] == "DISABLED"
    words = ["job", "submit", QUEUE, "--share", "A", "--name", "late", "--", "true"]
    assert qm([*a, *words]) == 1  # a disabled queue takes no new job
    assert capsys.readouterr().err.startswith("qm: error: FAILED_PRECONDITION")
