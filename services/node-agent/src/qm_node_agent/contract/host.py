"""What the contract needs to know of this host: the interface its address is on."""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct

SIOCGIFADDR = 0x8915


def _name(address: str) -> str:
    """The host part of `host[:port]` (an IPv6 address has more than one colon)."""
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def resolve(address: str) -> str:
    """An IP address for a host's registered address (a name is looked up)."""
    name = _name(address)
    if not name:
        return "127.0.0.1"
    try:
        return socket.gethostbyname(name)
    except OSError:
        return "127.0.0.1"


def needs_lookup(address: str) -> bool:
    """Whether `resolve` may ask the resolver, which can wait on DNS: for anything but
    an IPv4 address (which `gethostbyname` answers at once) or none."""
    name = _name(address)
    if not name:
        return False
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        return True
    return False


def interface_of(address: str) -> str:
    """The network interface holding `address` (a name is looked up): what
    resourceconfig.json calls `network_interface_name`. "eth0" when none does."""
    wanted = resolve(address)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _index, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(
                    probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15])
                )
            except OSError:
                continue
            if socket.inet_ntoa(packed[20:24]) == wanted:
                return name
    return "lo" if wanted.startswith("127.") else "eth0"
