"""The process runtime: the job runs as a local process group under a small wrapper.

The wrapper (a shell script, `qm_node_agent.wrapper`) leads a new session, so
the job survives an agent restart; the restarted agent finds it by pid (checked
against /proc/<pid>/cmdline; by its exit file in the cmdlines when the record
holds no pid yet) and learns how it ended from the wrapper's exit file. The
agent learns that a wrapper ended from a pidfd (no polling).

Each job runs in a mount namespace of its own (`unshare --mount`, which execs the
wrapper: same pid) where the wrapper bind-mounts the chain's /opt/ml tree at
/opt/ml and the job's hosts file at /etc/hosts before the job starts, so scripts
written for SageMaker run without containers. A host that cannot make mount
namespaces (not root, no unshare) is named at agent start; its jobs then run
without /opt/ml, with `QM_ML_DIR` naming the tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from qm_node_agent.contract.stage import (
    MOUNTS,
    Staged,
    only_rewrites,
    prepare,
    write_if_changed,
)
from qm_node_agent.errors import LaunchError, RuntimeFailure
from qm_node_agent.launch import HOSTS_FILE, ML_DIR, LaunchSpec
from qm_node_agent.records import AttemptRecord
from qm_node_agent.runtime.base import ExitStatus, tail
from qm_node_agent.settings import RuntimeKind
from qm_node_agent.spares import Spares
from qm_node_agent.wrapper import ARGV0, SHELL, bind_mounts, wrapper_argv
from quartermaster.events import StartPhases

log = logging.getLogger(__name__)

# The wrapper starts with `posix_spawn` (a vfork; Popen took 0.53 ms of the loop, this
# 0.29, p50 from a 100 MB agent-like process): in a session of its own, stdio on
# /dev/null, and with the dispositions Python ignores back to their defaults, as Popen
# does. It inherits no other descriptor: Python opens them all close-on-exec, and the
# runtime marks the agent's inherited ones so (`keep_descriptors_home`).
_STDIO_ON_NULL = [
    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0),
    (os.POSIX_SPAWN_DUP2, 0, 1),
    (os.POSIX_SPAWN_DUP2, 0, 2),
]
_RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)

POLL_S = 0.05


class ProcessJob:
    def __init__(
        self, pid: int | None, exit_file: Path, log_file: Path, *, child: bool = False
    ) -> None:
        self._pid = pid
        self._exit_file = exit_file
        self._log_file = log_file
        self._child = child  # started by this agent (reaped here), not adopted
        self._reaped = False
        self._returncode: int | None = None  # a child's, once reaped here
        self._killed = False
        self._seen_alive = False  # only then is the pid (= process group id) surely ours
        self.start_phases: StartPhases | None = (
            None  # a process has no image, volume or container to prepare
        )

    @property
    def pid(self) -> int | None:
        return self._pid

    def _alive(self) -> bool:
        if self._child:
            alive = self._running_child()
        elif self._pid is None:  # adopted after it ended: only its exit file is left
            alive = False
        else:
            alive = wrapper_alive(self._pid, self._exit_file)
        self._seen_alive |= alive
        return alive

    def _running_child(self) -> bool:
        """Not reaped yet (and reaped now if it ended, its status kept)."""
        if self._reaped or self._pid is None:
            return False
        try:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: how it ended is in its exit file
            pid, status = self._pid, None
        if pid == 0:
            return True
        self._reaped = True
        if status is not None:
            self._returncode = os.waitstatus_to_exitcode(status)
        return False

    async def wait(self) -> ExitStatus:
        while self._alive():
            assert self._pid is not None
            await _until_exited(self._pid)
        if self._seen_alive and self._pid is not None:
            # The wrapper just ended: take what it left running in its group down with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._pid, signal.SIGKILL)
        status = read_exit_file(self._exit_file)
        if status is not None:
            return status
        returncode = self._returncode
        if self._killed or (returncode is not None and returncode == -signal.SIGKILL):
            return ExitStatus(128 + signal.SIGKILL)
        raise RuntimeFailure(
            f"the job wrapper (pid {self._pid}) ended without an exit status"
            + (f" (exit {returncode})" if returncode is not None else "")
        )

    async def stop(self, grace_s: float) -> None:
        if not self._alive() or not self._signal(signal.SIGTERM):
            return
        deadline = time.monotonic() + grace_s
        while self._alive() and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
        if self._alive():
            self._killed = True
            self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> bool:
        if self._pid is None:
            return False
        try:
            os.killpg(self._pid, signum)
        except ProcessLookupError:
            return False
        return True

    async def log_tail(self) -> str:
        return await asyncio.to_thread(read_tail, self._log_file)

    async def remove(self) -> None:
        """Nothing to free: the work dir goes when the attempt's record does."""


class ProcessRuntime:
    kind = RuntimeKind.PROCESS.value

    async def ping(self) -> str:
        return "processes of this host (always answering)"

    def __init__(
        self, spares: Spares, job_path: str = os.defpath, namespaces: bool | None = None
    ) -> None:
        """`spares`: the agent's kept folders and files (see spares.py). `namespaces`:
        whether jobs get their own /opt/ml (None: if this host can make them)."""
        self._job_path = job_path
        self._spares = spares
        self._unshare = shutil.which("unshare") or "unshare"
        if namespaces is None:
            problem = namespace_problem(self._unshare)
            namespaces = problem is None
            if problem is not None:
                log.warning(
                    "process runtime: jobs run WITHOUT their own /opt/ml and /etc/hosts: "
                    "this host cannot make mount namespaces (%s); SageMaker training "
                    "containers' scripts will not find their config (QM_ML_DIR names it)",
                    problem,
                )
        self.namespaces = namespaces
        keep_descriptors_home()

    async def launch(self, spec: LaunchSpec, record: AttemptRecord) -> ProcessJob:
        command = spec.command
        if not command:
            raise LaunchError.client(
                "AlgorithmSpecification has no ContainerEntrypoint or ContainerArguments to run"
            )
        # Kept ones renamed into place where there are: no inode made (see spares.py).
        exit_file = Path(record.exit_file)
        self._spares.take_dir(spec.work_dir)
        self._spares.take_dir(spec.cache_dir)
        self._spares.take_file(exit_file)  # empty (no status until the wrapper's), or none
        # The agent's job PATH, unless the job's own Environment sets one.
        env = {"PATH": self._job_path, **spec.environment_with_cache(str(spec.cache_dir))}
        if not _resolvable(command[0], spec.work_dir, env["PATH"]):
            raise LaunchError.client(f"command not found: {command[0]}")
        outputs = spec.contract.outputs
        # A chain's first attempt: a kept tree, reset when given back, if there is one.
        placed = self._spares.take_tree(Path(outputs.ml_dir).parent)
        hosts_file = spec.contract.hosts_file
        mounts = Path(hosts_file).with_name(MOUNTS) if self.namespaces else None

        def lay_out() -> Staged:
            staged = prepare(
                spec.contract,
                spec.access,
                addresses=spec.addresses,
                network_interface=spec.network_interface,
                fresh=placed,
            )
            if mounts is not None:  # each time: a kept tree may hold another chain's
                binds = [(outputs.ml_dir, ML_DIR), (hosts_file, HOSTS_FILE)]
                write_if_changed(mounts, bind_mounts(binds).encode())
            return staged

        if placed and only_rewrites(spec.contract, spec.addresses):
            staged = lay_out()  # a few small files: less than a worker thread's round trip
        else:  # downloads, copies, lookups, or emptying what the last attempt wrote
            staged = await asyncio.to_thread(lay_out)
        work_dir = str(spec.work_dir)
        if not os.path.isdir(work_dir):
            raise LaunchError.infrastructure(f"the job's work dir is not a folder: {work_dir}")
        if self.namespaces:
            argv = [self._unshare, "--mount", "--propagation", "private"]
            argv += wrapper_argv(str(exit_file), command, record.log_file, str(mounts), work_dir)
        else:
            env["QM_ML_DIR"] = outputs.ml_dir
            argv = wrapper_argv(str(exit_file), command, record.log_file, "", work_dir)
        try:  # the wrapper opens the log itself: its creation is off the agent's loop
            pid = os.posix_spawn(
                argv[0], argv, env, file_actions=_STDIO_ON_NULL, setsid=True, setsigdef=_RESTORED
            )
        except OSError as err:
            raise LaunchError.infrastructure(f"cannot start the job wrapper: {err}") from err
        job = ProcessJob(pid, exit_file, Path(record.log_file), child=True)
        if staged.channels:
            job.start_phases = StartPhases(staging_s=staged.seconds, warm=False)
        return job

    async def adopt(self, record: AttemptRecord) -> ProcessJob | None:
        exit_file = Path(record.exit_file)
        pid = record.pid
        if pid is None:  # the agent stopped before it saved the pid: look for the wrapper
            pid = await asyncio.to_thread(find_wrapper, exit_file)
        ended = read_exit_file(exit_file) is not None
        if not ended and (pid is None or not wrapper_alive(pid, exit_file)):
            return None
        return ProcessJob(pid, exit_file, Path(record.log_file))

    async def forget(self, record: AttemptRecord) -> None:
        """Nothing to free for a process."""

    async def release(self, keep: set[str]) -> None:
        """A process keeps only the chain's cache folder, which the agent deletes."""


def keep_descriptors_home() -> None:
    """Mark every descriptor above stdio close-on-exec, so no job inherits one.

    Popen closed them all in each child; `posix_spawn` leaves that to the flag. Python
    sets it on every descriptor it makes, but one the agent inherited (from a service
    manager, a shell's job control) has it clear, and the job would hold it open: a
    pipe its supervisor waits on, say. Run once, when the runtime is made."""
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd > 2:
                with contextlib.suppress(OSError):  # the listing's own, gone by now
                    os.set_inheritable(fd, False)


def namespace_problem(unshare: str) -> str | None:
    """Why jobs cannot get a mount namespace with /opt/ml here, or None if they can."""
    try:
        os.makedirs(ML_DIR, exist_ok=True)  # the mount point
    except OSError as err:
        return f"cannot create {ML_DIR}: {err.strerror}"
    try:  # as the jobs' wrappers mount theirs
        with tempfile.NamedTemporaryFile("w", prefix="qm-mounts-", suffix=".fstab") as mounts:
            mounts.write(bind_mounts([(ML_DIR, ML_DIR), (HOSTS_FILE, HOSTS_FILE)]))
            mounts.flush()
            done = subprocess.run(
                [
                    unshare,
                    "--mount",
                    "--propagation",
                    "private",
                    "mount",
                    "--fstab",
                    mounts.name,
                    "--all",
                ],
                capture_output=True,
                timeout=10,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{unshare}: {err}"
    if done.returncode != 0:
        return done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}"
    return None


async def _until_exited(pid: int) -> None:
    """Until `pid` exits (a pidfd becomes readable), or one poll interval without pidfds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except OSError:  # no pidfds (old kernel, seccomp): poll
        await asyncio.sleep(POLL_S)
        return
    loop = asyncio.get_running_loop()
    exited = loop.create_future()

    def readable() -> None:
        if not exited.done():
            exited.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await exited
    finally:
        loop.remove_reader(fd)
        os.close(fd)


_found_on_path: set[tuple[str, str]] = set()  # (program, PATH) pairs `which` found


def _resolvable(program: str, work_dir: Path, job_path: str) -> bool:
    """A clear client error for a command that is nowhere, before anything starts.

    Found commands are remembered (a PATH search stats every folder on it, on the
    loop, for every launch); one removed since is still caught: the wrapper
    reports exit 127 of a missing command as a start error."""
    if "/" in program:
        path = Path(program) if os.path.isabs(program) else work_dir / program
        return path.is_file() and os.access(path, os.X_OK)
    if (program, job_path) in _found_on_path:
        return True
    if shutil.which(program, path=job_path) is None:
        return False
    if len(_found_on_path) < 1024:
        _found_on_path.add((program, job_path))
    return True


def wrapper_alive(pid: int, exit_file: Path) -> bool:
    """Is `pid` still our wrapper (not a zombie, not a reused pid)?"""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our child (same agent process)
    proc = Path("/proc") / str(pid)
    try:
        stat = (proc / "stat").read_text()
        cmdline = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    if state in ("Z", "X"):
        return False
    return str(exit_file).encode() in cmdline.split(b"\0")


def find_wrapper(exit_file: Path) -> int | None:
    """The pid of the live wrapper of `exit_file` (its argv names it), if there is one."""
    wanted = str(exit_file)
    for pid, found in wrappers():
        if found == wanted and wrapper_alive(pid, exit_file):
            return pid
    return None


def wrappers() -> Iterator[tuple[int, str]]:
    """Each process whose argv is a job wrapper's (`wrapper_argv`), with its exit file."""
    shell, argv0 = SHELL.encode(), ARGV0.encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if len(argv) > 4 and argv[0] == shell and argv[3] == argv0:
            yield int(proc.name), os.fsdecode(argv[4])


def read_exit_file(path: Path) -> ExitStatus | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return ExitStatus(
        int(data["exit_code"]), data.get("start_error"), data.get("infrastructure_error")
    )


def read_tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 2048))
            return tail(handle.read())
    except OSError:
        return ""
