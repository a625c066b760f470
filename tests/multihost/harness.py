"""Hosts on one machine: network namespaces on a bridge with no uplink, and processes in them.

Each `Host` is a network namespace with one veth pair: one end on the bridge, the
other inside the namespace with an address from `10.213.0.0/24` (a range used
only inside these namespaces). The bridge has no address and no uplink and the
namespaces have no default route, so traffic never leaves the machine and never
goes anywhere but these addresses. Cutting a host's link is `ip link set <veth
on the bridge> down`; healing is `up`.

`Processes` starts commands "on" a host (`ip netns exec NS ...`, which execs, so
the pid is the program's own), kills them with SIGKILL, restarts them with the
same command and environment (an operator's supervisor), and stops them all.
Names of namespaces and links carry a per-run token, so runs never collide.

Everything is torn down by `teardown()`, which tolerates a half-built network:
call it from a `finally`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.213.0"
PREFIX_LEN = 24


class HarnessError(RuntimeError):
    """The network or a process could not be set up."""


def unavailable_reason() -> str | None:
    """Why namespaces cannot be made here (None when they can): root and `ip` needed."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs the `ip` command (iproute2)"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise HarnessError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


@dataclass(frozen=True, slots=True)
class Host:
    """A namespace standing for one machine."""

    name: str  # role, e.g. "nats1"
    netns: str
    address: str
    veth: str  # the end on the bridge (cut it to cut the host off)

    @property
    def launcher(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.netns)


class HostNetwork:
    """A bridge and the hosts on it."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or secrets.token_hex(2)
        self.bridge = f"qmbr{self.token}"
        self.hosts: dict[str, Host] = {}
        self._next_octet = 10
        self._bridge_made = False

    def create_bridge(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        _ip("link", "set", self.bridge, "up")

    def add_host(self, name: str) -> Host:
        """A namespace `qm<token>-<name>` with one address on the bridge."""
        index = len(self.hosts) + 1
        octet = self._next_octet
        self._next_octet += 1
        host = Host(
            name=name,
            netns=f"qm{self.token}-{name}",
            address=f"{SUBNET}.{octet}",
            veth=f"qv{self.token}{index:02d}",
        )
        inner = f"qi{self.token}{index:02d}"
        self.hosts[name] = host  # registered first: teardown removes even a half-made one
        _ip("netns", "add", host.netns)
        _ip("link", "add", host.veth, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", host.netns)
        _ip("link", "set", host.veth, "master", self.bridge)
        _ip("link", "set", host.veth, "up")
        inside = ("netns", "exec", host.netns, "ip")
        _ip(*inside, "addr", "add", f"{host.address}/{PREFIX_LEN}", "dev", inner)
        _ip(*inside, "link", "set", inner, "up")
        _ip(*inside, "link", "set", "lo", "up")
        return host

    def cut(self, host: Host) -> None:
        _ip("link", "set", host.veth, "down")

    def heal(self, host: Host) -> None:
        _ip("link", "set", host.veth, "up")

    def teardown(self) -> None:
        """Delete every namespace (its veth goes with it) and the bridge; never raises."""
        for host in self.hosts.values():
            kill_leftovers_in(host.netns)
            _ip("link", "del", host.veth, check=False)
            _ip("netns", "del", host.netns, check=False)
        self.hosts.clear()
        if self._bridge_made:
            _ip("link", "del", self.bridge, check=False)
            self._bridge_made = False


@dataclass(slots=True)
class Managed:
    """One supervised program on one host."""

    name: str
    host: Host
    argv: tuple[str, ...]
    env: dict[str, str]
    log_file: Path
    stop_signal: int = signal.SIGTERM
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    kills: list[float] = field(default_factory=list)  # monotonic times of SIGKILLs

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process and self.process.poll() is None else None


class Processes:
    """Programs started on hosts; each is killed, restarted and stopped by name."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.programs: dict[str, Managed] = {}

    def start(
        self,
        name: str,
        host: Host,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        as_user: str | None = None,
        stop_signal: int = signal.SIGTERM,
    ) -> Managed:
        """Run `argv` on `host` with `env` added to this process's environment;
        `stop_signal` is what `stop_all` sends first (Postgres: SIGINT, fast shutdown)."""
        prefix = list(host.launcher)
        if as_user is not None:  # setpriv execs too: the pid stays the program's
            prefix += ["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups"]
        program = Managed(
            name,
            host,
            (*prefix, *argv),
            {**os.environ, **env},
            self.log_dir / f"{name}.log",
            stop_signal,
        )
        self.programs[name] = program
        self._launch(program)
        return program

    def restart(self, name: str) -> None:
        """Start `name` again with the same command and environment."""
        program = self.programs[name]
        if program.pid is None:
            self._launch(program)

    def kill(self, name: str) -> None:
        """SIGKILL `name` and reap it (its children, in their own sessions, live on)."""
        program = self.programs[name]
        if program.process is not None and program.process.poll() is None:
            program.process.kill()
            program.process.wait()
            program.kills.append(time.monotonic())

    def alive(self, name: str) -> bool:
        return self.programs[name].pid is not None

    def stop_all(self, timeout_s: float = 10.0) -> None:
        """SIGTERM every program, wait, then SIGKILL; never raises."""
        programs = [p for p in self.programs.values() if p.process is not None]
        running = [p.process for p in programs if p.process is not None]
        for program in programs:
            assert program.process is not None
            with contextlib.suppress(ProcessLookupError):
                if program.process.poll() is None:
                    program.process.send_signal(program.stop_signal)
        deadline = time.monotonic() + timeout_s
        for process in running:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()

    def _launch(self, program: Managed) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with program.log_file.open("ab") as out:
            out.write(f"--- start {program.starts + 1} at {time.time():.3f}\n".encode())
            out.flush()
            program.process = subprocess.Popen(
                program.argv,
                env=program.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        program.starts += 1


def kill_leftovers_in(netns: str) -> None:
    """SIGKILL whatever still runs in `netns` (jobs the node agents left behind)."""
    result = _ip("netns", "pids", netns, check=False)
    for pid in result.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
