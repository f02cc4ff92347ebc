"""Who listens on a port: /proc's socket tables parsed, and read for real on sockets we own."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli.ports import (
    Holder,
    Listener,
    bind_error,
    holders_text,
    listens_on,
    parse_listeners,
    port_holders,
    socket_inode,
)

# Lines as the kernel prints them (trailing columns shortened): a listener on 0.0.0.0:2024,
# one on 127.0.0.1:8080, a connection (state 01) and a TIME_WAIT (06) on 8080 too.
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1064 1
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 52001 1
   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 52002 1
   3: 0100007F:1F90 0100007F:C351 06 00000000:00000000 03:000002D7 00000000     0        0 0 3
   4: 0100007F:1F91 00000000:0000 0A
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:19FD 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7001 1
   1: 00000000000000000000000001000000:1A0B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7002 1
"""  # noqa: E501


def test_only_listening_sockets_are_parsed_with_address_port_and_inode() -> None:
    assert parse_listeners(TCP) == [
        Listener("0.0.0.0", 2024, 1064),
        Listener("127.0.0.1", 8080, 52001),
    ]  # the connection, the TIME_WAIT and the cut-off line are not listeners


def test_ipv6_addresses_are_read_word_by_word() -> None:
    assert parse_listeners(TCP6) == [Listener("::", 6653, 7001), Listener("::1", 6667, 7002)]


def test_a_descriptor_is_a_socket_only_by_its_link() -> None:
    assert socket_inode("socket:[52001]") == 52001
    assert socket_inode("pipe:[52001]") is None
    assert socket_inode("/dev/null") is None


def test_the_message_names_the_port_its_option_and_the_holder() -> None:
    holder = Holder(4242, "/usr/bin/python3 -m controller api --port 8080")
    assert holders_text(8080, "--api-port", [holder]) == (
        "port 8080 (--api-port) is in use by pid 4242"
        " (/usr/bin/python3 -m controller api --port 8080)"
    )
    assert holders_text(8080, "--api-port", []) == (
        "port 8080 (--api-port) is in use (by a process this user cannot see)"
    )
    assert holders_text(8080, "--api-port", None).startswith("port 8080 (--api-port) is in use")


def test_a_long_command_line_is_cut_so_the_message_stays_one_readable_line() -> None:
    long = Holder(7, "x" * 200)
    assert long.describe() == f"pid 7 ({'x' * 79}…)"
    assert Holder(7, "").describe() == "pid 7"


@pytest.fixture
def listening() -> Iterator[tuple[socket.socket, int]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield sock, sock.getsockname()[1]
    finally:
        sock.close()


def test_the_holder_of_a_real_port_is_found_by_pid(listening: tuple[socket.socket, int]) -> None:
    _, port = listening
    holders = port_holders(port)
    assert holders is not None
    assert [holder.pid for holder in holders] == [os.getpid()]
    assert Path(sys.executable).name in holders[0].command
    assert listens_on(os.getpid(), port) is True


def test_another_process_does_not_own_our_listener(listening: tuple[socket.socket, int]) -> None:
    """What keeps ``flowlane up`` from taking another stack's answer for its own child's."""
    _, port = listening
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert listens_on(other.pid, port) is False
    finally:
        other.kill()
        other.wait(5)


def test_a_port_in_use_cannot_be_bound_and_a_free_one_can(
    listening: tuple[socket.socket, int],
) -> None:
    _, port = listening
    error = bind_error("127.0.0.1", port)
    assert error is not None and error.errno == errno.EADDRINUSE
    assert bind_error("0.0.0.0", port) is not None  # the wildcard collides with it too
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert bind_error("127.0.0.1", free) is None
    assert port_holders(free) == []


def test_without_proc_the_answer_is_unknown_not_no(tmp_path: Path) -> None:
    assert port_holders(8080, proc=tmp_path) is None
    assert listens_on(os.getpid(), 8080, proc=tmp_path) is None
