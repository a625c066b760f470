"""The namespace harness itself: hosts reach each other and nothing else; a cut link
cuts; everything is gone after teardown, even with programs still running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from multihost.harness import HostNetwork, Processes, unavailable_reason

pytestmark = pytest.mark.multihost

CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()\n"
    "    print('connected')\n"
    "except OSError as err:\n"
    "    print(type(err).__name__, err.errno)\n"
)


@pytest.fixture
def network(tmp_path: Path) -> Iterator[tuple[HostNetwork, Processes]]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"multi-host harness {reason}")
    net, procs = HostNetwork(), Processes(tmp_path / "logs")
    try:
        net.create_bridge()
        yield net, procs
    finally:
        procs.stop_all()
        net.teardown()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.split(") ", 1)[1][0] != "Z"  # a zombie is gone, only not yet reaped


def _connect(launcher: tuple[str, ...], address: str, port: int) -> str:
    argv = [*launcher, sys.executable, "-c", CONNECT, address, str(port)]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()


def test_hosts_reach_each_other_only_and_a_cut_link_cuts(
    network: tuple[HostNetwork, Processes],
) -> None:
    net, procs = network
    a, b = net.add_host("a"), net.add_host("b")
    listen = f"import socket; s = socket.create_server(('{b.address}', 7000)); s.listen()\n"
    listen += "while True: s.accept()[0].close()\n"
    procs.start("listener", b, [sys.executable, "-c", listen], {})
    for _ in range(50):
        if _connect(a.launcher, b.address, 7000) == "connected":
            break
    assert _connect(a.launcher, b.address, 7000) == "connected"
    # No route out of the subnet: traffic cannot leave the machine from a host.
    assert _connect(a.launcher, "192.0.2.1", 80).startswith("OSError 101")  # ENETUNREACH

    net.cut(b)
    assert _connect(a.launcher, b.address, 7000) != "connected"
    net.heal(b)
    assert _connect(a.launcher, b.address, 7000) == "connected"


def test_teardown_removes_namespaces_links_and_what_runs_in_them(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"multi-host harness {reason}")
    net, procs = HostNetwork(), Processes(tmp_path / "logs")
    net.create_bridge()
    host = net.add_host("a")
    # A child in a session of its own, as a job under a node agent would be.
    orphan = "import subprocess, time; subprocess.Popen(['sleep', '300'], start_new_session=True)"
    procs.start("parent", host, [sys.executable, "-c", orphan + "; time.sleep(300)"], {})
    for _ in range(100):
        inside = subprocess.run(
            ["ip", "netns", "pids", host.netns], capture_output=True, text=True
        ).stdout.split()
        if len(inside) >= 2:  # the parent and its sleep
            break
        time.sleep(0.05)
    procs.kill("parent")

    net.teardown()

    time.sleep(0.2)
    alive = [pid for pid in map(int, inside) if _alive(pid)]
    assert not alive, f"left running after teardown: {alive}"

    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "link", "show"], capture_output=True, text=True).stdout
    assert host.netns not in namespaces
    assert net.bridge not in links and host.veth not in links
