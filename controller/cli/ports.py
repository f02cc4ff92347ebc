"""Who listens on a TCP port: the kernel's socket tables, read without any tool.

``flowlane up`` needs two answers that a connection attempt cannot give.
Before it starts anything: is a port it will print already taken, and by
which process, so it can say so in one line instead of starting a child
that dies on ``Address already in use``.  And before it prints "flowlane is
up": does the listener on each printed port belong to the child it started,
not to another stack that happens to answer on the same port.

Linux lists every listening socket in ``/proc/net/tcp`` and ``tcp6`` with
its inode, and a process's sockets appear in ``/proc/PID/fd`` as links to
``socket:[INODE]``; that maps a port to its processes with no ``ss`` or
``lsof`` installed.  The parsing is pure, so it is tested on fixed text;
the rest only reads files.  Where ``/proc`` cannot be read (another OS, a
locked-down container) the answers are ``None``: "cannot tell", never "no".
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import re
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
_LISTEN = "0A"
"""``st`` of a listening socket in ``/proc/net/tcp`` (``TCP_LISTEN``, in hex)."""
_SOCKET_LINK = re.compile(r"^socket:\[(\d+)\]$")


@dataclass(frozen=True, slots=True)
class Listener:
    """A listening TCP socket from ``/proc/net/tcp{,6}``."""

    address: str
    port: int
    inode: int


@dataclass(frozen=True, slots=True)
class Holder:
    """A process with a listening socket on a port."""

    pid: int
    command: str
    """Its command line, spaces between the arguments; empty when it cannot be read."""

    def describe(self, width: int = 80) -> str:
        """``pid N (command)``, the command cut to ``width`` characters: the start of a
        command line names the program, and the message stays one readable line."""
        if not self.command:
            return f"pid {self.pid}"
        command = self.command if len(self.command) <= width else self.command[: width - 1] + "…"
        return f"pid {self.pid} ({command})"


# ---- pure pieces ----------------------------------------------------------------------


def _address(hex_address: str) -> str:
    """The kernel prints each 32-bit word of the address in host byte order (little-endian
    here), so ``0100007F`` is 127.0.0.1; IPv6 is four such words."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def parse_listeners(table: str) -> list[Listener]:
    """The listening sockets in the text of ``/proc/net/tcp`` or ``/proc/net/tcp6``.

    Each line after the header is ``sl local rem st tx:rx tr:when retrnsmt uid timeout
    inode ...``; lines in any other state (connections, TIME_WAIT) are skipped, and so is
    a line too short to be one (the file is read while the kernel changes it).
    """
    found = []
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _LISTEN:
            continue
        address, _, port = fields[1].partition(":")
        try:
            found.append(Listener(_address(address), int(port, 16), int(fields[9])))
        except ValueError:
            continue
    return found


def socket_inode(link: str) -> int | None:
    """The inode of a ``/proc/PID/fd`` link to a socket (``socket:[12345]``), else None."""
    match = _SOCKET_LINK.match(link)
    return int(match[1]) if match else None


def holders_text(port: int, option: str, holders: list[Holder] | None) -> str:
    """One line: which port is taken, for which option, and by what if that is known."""
    if holders:
        by = ", ".join(holder.describe() for holder in holders)
        return f"port {port} ({option}) is in use by {by}"
    return f"port {port} ({option}) is in use (by a process this user cannot see)"


# ---- reading /proc ----------------------------------------------------------------------


def listeners(proc: Path = PROC) -> list[Listener] | None:
    """Every listening TCP socket of this network namespace; None when /proc cannot tell."""
    found: list[Listener] = []
    readable = False
    for name in ("tcp", "tcp6"):
        try:
            table = (proc / "net" / name).read_text()
        except OSError:
            continue  # no IPv6 in this kernel, or no /proc at all
        readable = True
        found += parse_listeners(table)
    return found if readable else None


def _socket_inodes(pid: int, proc: Path) -> set[int]:
    inodes: set[int] = set()
    try:
        entries = list((proc / str(pid) / "fd").iterdir())
    except OSError:
        return inodes  # gone, or another user's
    for entry in entries:
        with contextlib.suppress(OSError):
            inode = socket_inode(str(entry.readlink()))
            if inode is not None:
                inodes.add(inode)
    return inodes


def _command(pid: int, proc: Path) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)


def port_holders(port: int, proc: Path = PROC) -> list[Holder] | None:
    """The processes listening on TCP ``port``, by pid; None when /proc cannot tell.

    Empty when the port's socket belongs to no process this user may inspect (another
    user's, without root) or nobody listens.
    """
    table = listeners(proc)
    if table is None:
        return None
    wanted = {listener.inode for listener in table if listener.port == port}
    if not wanted:
        return []
    holders = []
    for entry in proc.iterdir():
        if entry.name.isdigit() and _socket_inodes(int(entry.name), proc) & wanted:
            holders.append(Holder(int(entry.name), _command(int(entry.name), proc)))
    return sorted(holders, key=lambda holder: holder.pid)


def listens_on(pid: int, port: int, proc: Path = PROC) -> bool | None:
    """Whether process ``pid`` itself holds a listening socket on TCP ``port``.

    What makes a readiness check impossible to fool: another stack can answer on the
    port, but the socket's inode is not among our child's descriptors.  None when /proc
    cannot tell.
    """
    table = listeners(proc)
    if table is None:
        return None
    wanted = {listener.inode for listener in table if listener.port == port}
    return bool(wanted & _socket_inodes(pid, proc))


def bind_error(host: str, port: int) -> OSError | None:
    """Why a server could not listen on ``host:port`` now (None: it could).

    Binds with ``SO_REUSEADDR`` as servers do, so connections still in TIME_WAIT from an
    earlier run do not count as "in use"; a listener on the port, on this address or
    on the wildcard, still does.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        return OSError(errno.EADDRNOTAVAIL, f"cannot resolve {host}: {exc.strerror}")
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc
    return None
