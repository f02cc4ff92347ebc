"""The contract with os-ken's internals: each one ``osken_internals`` relies on, checked.

An os-ken upgrade that renames, removes or changes one of them fails here,
with the internal named, rather than as a hung stop, a lost reply or a
duplicate xid on a live fabric.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from os_ken.base import app_manager  # first: os_ken.controller alone is a circular import
from os_ken.controller import controller as ofp_controller
from os_ken.lib import hub
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow import osken_internals


@pytest.fixture
def datapath() -> Iterator[Any]:
    """A ``StoppableDatapath`` on a connected TCP socket, never served."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        sock, address = server.accept()
    try:
        yield osken_internals.StoppableDatapath(sock, address)
    finally:
        sock.close()
        client.close()


def _names(function: Any) -> set[str]:
    """The global, attribute and local names a function's code refers to.

    Nested functions count, and so does a function a decorator closed over
    (os-ken wraps ``_recv_loop`` in ``_deactivate`` without ``functools.wraps``).
    """
    names: set[str] = set()
    functions = [function]
    while functions:
        current = functions.pop()
        for cell in current.__closure__ or ():
            if inspect.isfunction(cell.cell_contents):
                functions.append(cell.cell_contents)
        codes = [current.__code__]
        while codes:
            code = codes.pop()
            names |= {*code.co_names, *code.co_varnames}
            codes += [const for const in code.co_consts if inspect.iscode(const)]
    return names


def test_datapath_xid_is_the_counter_set_xid_advances(datapath: Any) -> None:
    assert isinstance(getattr(datapath, "xid", None), int), "Datapath.xid: no int attribute"
    assert datapath.ofproto.MAX_XID == 0xFFFFFFFF, "Datapath.ofproto.MAX_XID changed"

    def barrier() -> Any:
        return v13_parser.OFPBarrierRequest(datapath)

    datapath.xid = 41
    msg = barrier()
    assert osken_internals.assign_xid(datapath, msg) == 42, "Datapath.set_xid: not xid + 1"
    assert datapath.xid == 42 and msg.xid == 42, "Datapath.set_xid: does not store the xid"
    assert osken_internals.reserve_xids(datapath, 3) == [43, 44, 45]
    assert osken_internals.assign_xid(datapath, barrier()) == 46, "Datapath.set_xid ignores .xid"
    datapath.xid = datapath.ofproto.MAX_XID
    assert osken_internals.assign_xid(datapath, barrier()) == 0, "Datapath.set_xid: no wrap"
    datapath.xid = datapath.ofproto.MAX_XID - 1
    assert osken_internals.reserve_xids(datapath, 3) == [0xFFFFFFFF, 0, 1]
    assert datapath.xid == 1


def test_msg_parsers_table_is_what_ofproto_parser_msg_dispatches_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parsers = getattr(v13_parser, "_MSG_PARSERS", None)
    assert isinstance(parsers, dict), "ofproto_v1_3_parser._MSG_PARSERS: no dict"
    monkeypatch.setattr(v13_parser, "_MSG_PARSERS", dict(parsers))
    original = osken_internals.multipart_reply_parser()
    parameters = list(inspect.signature(original).parameters)
    assert parameters == ["datapath", "version", "msg_type", "msg_len", "xid", "buf"], (
        f"_MSG_PARSERS[OFPT_MULTIPART_REPLY] takes {parameters}"
    )
    seen: list[tuple[Any, ...]] = []

    def parse(*args: Any) -> str:
        seen.append(args)
        return "parsed"

    osken_internals.set_multipart_reply_parser(parse)
    header = bytes([4, v13.OFPT_MULTIPART_REPLY, 0, 16, 0, 0, 0, 9]) + bytes(8)
    result = ofproto_parser.msg(None, 4, v13.OFPT_MULTIPART_REPLY, 16, 9, header)
    assert result == "parsed", "ofproto_parser.msg no longer dispatches through _MSG_PARSERS"
    assert seen and seen[0][:5] == (None, 4, v13.OFPT_MULTIPART_REPLY, 16, 9)


def test_flow_stats_reply_can_be_built_from_headers_and_buf() -> None:
    """What ``RawFlowStats`` builds in place of os-ken's parse."""
    msg = v13_parser.OFPFlowStatsReply(None)
    msg.set_headers(4, v13.OFPT_MULTIPART_REPLY, 16, 7)
    msg.set_buf(b"x" * 16)
    assert (msg.xid, msg.msg_len, bytes(msg.buf)) == (7, 16, b"x" * 16), (
        "MsgBase.set_headers/set_buf changed"
    )


def test_server_loop_builds_the_stream_server_named_in_its_module() -> None:
    assert getattr(ofp_controller, "StreamServer", None) is hub.StreamServer, (
        "os_ken.controller.controller.StreamServer is not hub.StreamServer"
    )
    assert "StreamServer" in _names(ofp_controller.OpenFlowController.server_loop), (
        "OpenFlowController.server_loop no longer looks up StreamServer in its module"
    )
    original = osken_internals.replace_stream_server(dict)
    try:
        assert ofp_controller.StreamServer is dict
    finally:
        osken_internals.restore_stream_server(original)
    assert ofp_controller.StreamServer is hub.StreamServer


def test_stream_server_keeps_its_listening_socket() -> None:
    server = hub.StreamServer(("127.0.0.1", 0), lambda sock, address: None)
    try:
        sock = osken_internals.listening_socket(server)
        assert isinstance(sock, socket.socket), "hub.StreamServer.server: not a socket"
        assert sock.getsockname()[1] != 0
    finally:
        server.server.close()
    parameters = inspect.signature(hub.StreamServer.__init__).parameters
    assert "listen_info" in parameters and "handle" in parameters, "hub.StreamServer's arguments"


def test_datapath_send_queue_and_semaphore(datapath: Any) -> None:
    for name in ("_recv_loop", "_send_loop", "serve", "send"):
        assert callable(getattr(ofp_controller.Datapath, name, None)), f"Datapath.{name} is gone"
    assert datapath.send_q is not None and datapath.send_q.maxsize > 0, "Datapath.send_q"
    assert hasattr(datapath, "_send_q_sem"), "Datapath._send_q_sem is gone"
    # The send loop reads (buf, close_socket) pairs; the close marker is one.
    assert {"send_q", "_send_q_sem"} <= _names(ofp_controller.Datapath._send_loop), (
        "Datapath._send_loop no longer reads send_q and releases _send_q_sem"
    )
    datapath._wake_send_loop()
    assert datapath.send_q.get(block=False) == (b"", True)
    datapath.send_q = None  # what the send loop leaves when it ended
    datapath._wake_send_loop()


def test_receive_loop_calls_the_ofp_event_handlers_itself() -> None:
    """``InlineReplies`` answers waiters on the receive thread, not the app's event thread."""
    names = _names(ofp_controller.Datapath._recv_loop)
    assert {"ofp_brick", "get_handlers", "callers", "dispatchers"} <= names, (
        "Datapath._recv_loop no longer calls the ofp_event brick's handlers directly"
    )
    assert osken_internals.openflow_brick() is app_manager.lookup_service_brick("ofp_event")


def test_only_osken_internals_touches_os_ken_internals() -> None:
    """No other module reads an os-ken private name, replaces an os-ken global or sets an xid."""
    package = Path(__file__).resolve().parents[2] / "controller"
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "osken_internals.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        osken: set[str] = set()  # names bound to os-ken modules and classes
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("os_ken"):
                osken |= {alias.asname or alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                osken |= {
                    alias.asname or alias.name.split(".")[0]
                    for alias in node.names
                    if alias.name.startswith("os_ken")
                }
        where = path.relative_to(package.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                private = node.attr.startswith("_") and not node.attr.startswith("__")
                if node.value.id in osken and private:
                    found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
                if node.value.id in osken and isinstance(node.ctx, ast.Store):
                    found.append(f"{where}:{node.lineno}: sets {node.value.id}.{node.attr}")
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "xid"
                and isinstance(node.ctx, ast.Store)
            ):
                found.append(f"{where}:{node.lineno}: sets .xid")
        if osken:
            found += _private_overrides(".".join(where.with_suffix("").parts), str(where))
    assert not found, "os-ken internals outside osken_internals.py:\n" + "\n".join(found)


def _private_overrides(module_name: str, where: str) -> list[str]:
    """Private methods of an os-ken class that a class of ``module_name`` redefines."""
    module = importlib.import_module(module_name)
    found = []
    for cls in vars(module).values():
        if not inspect.isclass(cls) or cls.__module__ != module_name:
            continue
        for base in cls.__mro__[1:]:
            if not base.__module__.startswith("os_ken"):
                continue
            for name in vars(cls):
                if name.startswith("_") and not name.startswith("__") and name in vars(base):
                    found.append(f"{where}: {cls.__name__} overrides {base.__name__}.{name}")
    return found
