"""A batch goes out as one write ending in its barrier; the switch's errors fail it."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

import pytest
from os_ken.ofproto import ofproto_v1_3 as v13
from os_ken.ofproto import ofproto_v1_3_parser as v13_parser

from controller.openflow.channel import Channel
from controller.openflow.flowstats import RawFlowStats
from controller.openflow.replies import ReplyWaiter, RequestFailedError
from controller.openflow.wire import encode

DPID = 9


class FakeDatapath:
    """Records what os-ken would queue for the send thread; ``answer`` plays the switch."""

    ofproto = v13
    ofproto_parser = v13_parser
    id = DPID

    def __init__(self, answer: Callable[[bytes], None], open_: bool = True) -> None:
        self.xid = 0
        self.writes: list[bytes] = []
        self._answer = answer
        self._open = open_

    def set_xid(self, msg: object) -> int:
        self.xid += 1
        msg.set_xid(self.xid)  # type: ignore[attr-defined]
        return self.xid

    def send(self, buf: bytes) -> bool:
        if not self._open:
            return False
        self.writes.append(buf)
        # The switch answers on another thread, as the receive loop does.
        threading.Thread(target=self._answer, args=(buf,)).start()
        return True


def messages_in(buf: bytes) -> list[tuple[int, int]]:
    """(type, xid) of every OpenFlow message in one write."""
    found, offset = [], 0
    while offset < len(buf):
        _version, kind, length, xid = struct.unpack_from("!BBHI", buf, offset)
        found.append((kind, xid))
        offset += length
    return found


def flow_mods(datapath: FakeDatapath, count: int) -> list[bytes]:
    return [
        encode(
            v13_parser.OFPFlowMod(datapath, priority=100 + n, match=v13_parser.OFPMatch(tcp_dst=n))
        )
        for n in range(count)
    ]


def test_a_batch_is_one_write_of_every_message_then_the_barrier() -> None:
    replies = ReplyWaiter()

    def answer(buf: bytes) -> None:
        kind, xid = messages_in(buf)[-1]
        assert kind == v13.OFPT_BARRIER_REQUEST
        replies.part(DPID, xid, [], False)

    datapath = FakeDatapath(answer)
    Channel(datapath, replies, timeout_s=2.0, raw=RawFlowStats()).batch(flow_mods(datapath, 5))
    assert len(datapath.writes) == 1
    sent = messages_in(datapath.writes[0])
    assert [kind for kind, _ in sent] == [v13.OFPT_FLOW_MOD] * 5 + [v13.OFPT_BARRIER_REQUEST]
    assert len({xid for _, xid in sent}) == 6


def test_an_error_for_any_message_of_the_batch_fails_it() -> None:
    replies = ReplyWaiter()

    def answer(buf: bytes) -> None:
        sent = messages_in(buf)
        replies.fail(DPID, sent[2][1], "switch error type=5 code=1")  # before the barrier
        replies.part(DPID, sent[-1][1], [], False)

    datapath = FakeDatapath(answer)
    with pytest.raises(RequestFailedError, match=r"1 message\(s\) rejected.*type=5"):
        Channel(datapath, replies, timeout_s=2.0, raw=RawFlowStats()).batch(flow_mods(datapath, 4))


def test_a_closed_connection_fails_the_batch_at_once() -> None:
    datapath = FakeDatapath(lambda buf: None, open_=False)
    with pytest.raises(RequestFailedError, match="closed"):
        Channel(datapath, ReplyWaiter(), timeout_s=5.0, raw=RawFlowStats()).batch(
            flow_mods(datapath, 2)
        )


def test_a_switch_that_never_answers_times_the_batch_out() -> None:
    datapath = FakeDatapath(lambda buf: None)
    with pytest.raises(RequestFailedError, match="no reply"):
        Channel(datapath, ReplyWaiter(), timeout_s=0.2, raw=RawFlowStats()).batch(
            flow_mods(datapath, 2)
        )


def test_a_batch_takes_consecutive_xids_and_leaves_the_counter_after_them() -> None:
    replies = ReplyWaiter()

    def answer(buf: bytes) -> None:
        replies.part(DPID, messages_in(buf)[-1][1], [], False)

    datapath = FakeDatapath(answer)
    datapath.xid = v13.MAX_XID - 1  # the counter wraps as os-ken's does
    Channel(datapath, replies, timeout_s=2.0, raw=RawFlowStats()).batch(flow_mods(datapath, 3))
    assert [xid for _, xid in messages_in(datapath.writes[0])] == [v13.MAX_XID, 0, 1, 2]
    assert datapath.xid == 2
