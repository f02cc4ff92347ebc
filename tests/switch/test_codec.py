"""The switch codec: whole messages in, what the step needs out; requests with given xids."""

from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_3 as v13

from controller.openflow import messages
from controller.openflow.framing import header, with_xid
from controller.openflow.osken_internals import DATAPATH, encode
from controller.pipeline.diff import FlowDiff
from controller.pipeline.flows import FlowKey
from controller.pipeline.groups import Bucket, GroupDiff, GroupEntry, GroupType, MeterEntry
from controller.pipeline.plan import PortState
from controller.switch import codec
from tests.switch import wire_bytes


def test_a_port_description_reply_keeps_the_switch_s_own_ports() -> None:
    body = wire_bytes.port(1, "eth1") + wire_bytes.port(v13.OFPP_LOCAL, "br0", 0)
    part = codec.decode(wire_bytes.multipart(7, v13.OFPMP_PORT_DESC, body))
    assert isinstance(part, codec.Part) and part.xid == 7 and not part.more
    assert isinstance(part.body, tuple)
    assert codec.own_ports(part.body) == (PortState(1, "eth1", 10_000_000_000, True, 1),)


def test_a_flow_stats_part_stays_raw_and_says_more() -> None:
    part = codec.decode(wire_bytes.multipart(9, v13.OFPMP_FLOW, b"", more=True))
    assert part == codec.Part(9, v13.OFPMP_FLOW, True, b"")


def test_port_status_error_barrier_and_others() -> None:
    status = codec.decode(
        wire_bytes.port_status(v13.OFPPR_MODIFY, wire_bytes.port(2, "eth2", down=True))
    )
    assert isinstance(status, codec.PortStatus)
    assert status.port == PortState(2, "eth2", 10_000_000_000, False, 2)
    assert status.reason_text == "modified" and not status.deleted
    error = codec.decode(wire_bytes.error(0x21, v13.OFPET_FLOW_MOD_FAILED, 5))
    assert error == codec.ErrorReply(0x21, v13.OFPET_FLOW_MOD_FAILED, 5)
    assert isinstance(error, codec.ErrorReply)
    assert error.text == f"switch error type={v13.OFPET_FLOW_MOD_FAILED} code=5 for xid 0x21"
    assert codec.decode(wire_bytes.barrier_reply(3)) == codec.BarrierReply(3)
    assert codec.decode(wire_bytes.message(v13.OFPT_ECHO_REPLY, 4, b"")) == codec.Other(
        v13.OFPT_ECHO_REPLY, 4
    )


@pytest.mark.parametrize(
    "data",
    [
        b"\x04",  # shorter than a header
        wire_bytes.barrier_reply(1) + b"x",  # longer than it says
        b"\x01\x15\x00\x08\x00\x00\x00\x01",  # OpenFlow 1.0
    ],
)
def test_what_is_not_one_whole_1_3_message_is_refused(data: bytes) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode(data)


def test_split_cuts_a_stream_into_messages() -> None:
    one, two = wire_bytes.barrier_reply(1), wire_bytes.error(2)
    assert list(codec.split(one + two)) == [one, two]
    with pytest.raises(codec.CodecError):
        list(codec.split(one + two[:-1]))


def test_requests_carry_the_xid_they_are_given() -> None:
    for request in (codec.PORT_DESC, codec.FLOWS, codec.GROUPS, codec.METERS, codec.PORT_STATS):
        assert header(with_xid(request, 0xABCDEF))[3] == 0xABCDEF
    assert header(codec.COUNT_FLOWS)[1] == v13.OFPT_MULTIPART_REQUEST


def test_a_batch_goes_meters_groups_adds_deletes_then_group_deletes() -> None:
    group = GroupEntry(GroupType.SELECT, (Bucket((), 1), Bucket((), 2)))
    flows = FlowDiff(add=(), delete=(FlowKey(0, 5, ()),), unchanged=0, delete_by_cookie=((2, 9),))
    groups = GroupDiff(add=(group,), delete=(77,))
    meters = [MeterEntry(1, 100, 10), MeterEntry(2, 100, 10)]
    batch = codec.batch_messages(flows, groups, meters, {2: MeterEntry(2, 50, 5)})
    kinds = [header(msg)[1] for msg in batch]
    assert kinds == [
        v13.OFPT_METER_MOD,
        v13.OFPT_METER_MOD,
        v13.OFPT_GROUP_MOD,
        v13.OFPT_FLOW_MOD,
        v13.OFPT_FLOW_MOD,
        v13.OFPT_GROUP_MOD,
    ]
    # A meter the switch has is modified, a new one added.
    assert batch[0][8:10] == v13.OFPMC_ADD.to_bytes(2, "big")
    assert batch[1][8:10] == v13.OFPMC_MODIFY.to_bytes(2, "big")
    assert batch[4] == encode(messages.flow_delete_by_cookie(DATAPATH, 2, 9))
