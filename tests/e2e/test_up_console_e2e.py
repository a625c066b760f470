"""`qm up` as a user runs it: a taken port is refused before anything starts, and Ctrl-C
says which jobs keep running (and they do, to be re-adopted)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quartermaster.cli.main import main as qm

QM = [sys.executable, "-m", "quartermaster.cli.main"]


def test_qm_up_on_a_taken_port_says_so_and_starts_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        data = tmp_path / "data"
        code = qm(["up", "--grpc-port", str(port), "--data-dir", str(data), "--nodes", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"qm: error: port {port} is in use (another `qm up`?): stop it, or pick " + (
        "another with --grpc-port\n"
    )
    assert not data.exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_on_qm_up_names_the_jobs_that_keep_running(tmp_path: Path) -> None:
    data = tmp_path / "data"
    pid_file = tmp_path / "job.pid"
    flags = ["--insecure", "--nodes", "1", "--grpc-port", "0", "--metrics-port", "0"]
    up = subprocess.Popen(
        [*QM, "up", *flags, "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    job_pid = None
    try:
        assert up.stdout is not None
        said: list[str] = []
        while not (found := re.search(r"is up: gRPC (127\.0\.0\.1:\d+)", said[-1] if said else "")):
            said.append(up.stdout.readline())
            assert said[-1], "".join(said)  # qm up ended before it was up
        a = ["--insecure", "--address", found.group(1)]

        def run(*words: str) -> str:
            done = subprocess.run([*QM, *a, *words], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return done.stdout

        run("env", "create", "env", "--capacity", "ml.g5.xlarge=1")
        run("policy", "create", "fifo")
        run("queue", "create", "q", "--env", "env", "--policy", "fifo")
        run("share", "create", "q", "A", "--capacity", "ml.g5.xlarge=1")
        script = f"echo $$ > {pid_file}; exec sleep 600"
        job_id = run(
            "job", "submit", "q", "--share", "A", "--name", "long", "--", "sh", "-c", script
        )
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline, "the job did not start"
            time.sleep(0.1)
        job_pid = int(pid_file.read_text())
        up.send_signal(signal.SIGINT)
        out, _ = up.communicate(timeout=60)
        assert up.returncode == 0, out
        assert "1 job(s) keep running" in out
        assert f"long  {job_id.strip()}  on node-1" in out
        assert "Traceback" not in out
        assert _alive(job_pid)  # left running, as the message says
    finally:
        if up.poll() is None:
            up.kill()
        if job_pid is not None and _alive(job_pid):
            os.killpg(os.getpgid(job_pid), signal.SIGKILL)
