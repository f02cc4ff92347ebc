"""make_match canonical form, and the simulator's OpenFlow lookup rules."""

from __future__ import annotations

import pytest

from controller.pipeline.flows import (
    FIELD_BITS,
    ApplyActions,
    FlowEntry,
    GotoTable,
    MatchField,
    Owner,
    SetQueue,
    WriteMetadata,
    make_match,
)
from controller.pipeline.simulate import (
    AmbiguousLookupError,
    TableMissError,
    lookup,
    run_packet,
)

# --------------------------------------------------------------------------------------------
# make_match
# --------------------------------------------------------------------------------------------


def test_full_mask_is_dropped() -> None:
    assert make_match(MatchField("tcp_dst", 80, 0xFFFF)) == (MatchField("tcp_dst", 80),)
    assert make_match(MatchField("ipv4_dst", 0x0A000001, 0xFFFFFFFF)) == (
        MatchField("ipv4_dst", 0x0A000001),
    )
    # bits above the field width do not make a mask partial
    assert make_match(MatchField("tcp_dst", 80, 0x1FFFF)) == (MatchField("tcp_dst", 80),)


def test_value_is_masked() -> None:
    assert make_match(MatchField("ipv4_dst", 0x0A0000FF, 0xFFFFFF00)) == (
        MatchField("ipv4_dst", 0x0A000000, 0xFFFFFF00),
    )
    assert make_match(MatchField("tcp_dst", 8005, 0xFFF8)) == (MatchField("tcp_dst", 8000, 0xFFF8),)
    # an exact value wider than its field is cut to the field
    assert make_match(MatchField("ip_dscp", 0x7F)) == (MatchField("ip_dscp", 0x3F),)


def test_zero_mask_is_dropped() -> None:
    assert make_match(MatchField("tcp_dst", 1234, 0)) == ()
    assert make_match(MatchField("eth_type", 0x800), MatchField("tcp_src", 5, 0x0000)) == (
        MatchField("eth_type", 0x800),
    )


def test_order_does_not_matter() -> None:
    fields = [
        MatchField("tcp_dst", 80),
        MatchField("eth_type", 0x800),
        MatchField("ip_proto", 6),
        MatchField("ipv4_src", 0x0A000000, 0xFF000000),
    ]
    assert make_match(*fields) == make_match(*reversed(fields))
    assert [f.name for f in make_match(*fields)] == ["eth_type", "ip_proto", "ipv4_src", "tcp_dst"]


def test_equivalent_duplicates_merge() -> None:
    assert make_match(MatchField("tcp_dst", 80), MatchField("tcp_dst", 80, 0xFFFF)) == (
        MatchField("tcp_dst", 80),
    )
    assert make_match(
        MatchField("ipv4_dst", 0x0A000001, 0xFFFFFF00),
        MatchField("ipv4_dst", 0x0A000002, 0xFFFFFF00),
    ) == (MatchField("ipv4_dst", 0x0A000000, 0xFFFFFF00),)


@pytest.mark.parametrize(
    "pair",
    [
        (MatchField("tcp_dst", 80), MatchField("tcp_dst", 81)),
        (MatchField("tcp_dst", 80), MatchField("tcp_dst", 80, 0xFFF0)),
        (MatchField("ipv4_dst", 0x0A000000, 0xFF000000), MatchField("ipv4_dst", 0x0B000000)),
    ],
)
def test_conflicting_duplicates_raise(pair: tuple[MatchField, MatchField]) -> None:
    with pytest.raises(ValueError, match="conflicting values for match field"):
        make_match(*pair)


def test_unknown_field_is_refused() -> None:
    with pytest.raises(KeyError):
        make_match(MatchField("tcp_flags", 2))


def test_masked_field_covers_packets() -> None:
    (field,) = make_match(MatchField("tcp_dst", 8000, 0xFFF8))
    assert [p for p in range(7990, 8020) if field.covers(p)] == list(range(8000, 8008))
    assert FIELD_BITS["tcp_dst"] == 16


# --------------------------------------------------------------------------------------------
# lookup / run_packet
# --------------------------------------------------------------------------------------------

ANY = FlowEntry(0, 5, make_match(), (GotoTable(1),), Owner.POLICY)
IPV4 = FlowEntry(0, 5, make_match(MatchField("eth_type", 0x800)), (GotoTable(2),), Owner.POLICY)
TCP_HIGH = FlowEntry(
    0,
    10,
    make_match(MatchField("ip_proto", 6)),
    (WriteMetadata(1, 0xFF), GotoTable(2)),
    Owner.POLICY,
)
TCP_PACKET = {"eth_type": 0x800, "ip_proto": 6}


def test_highest_priority_wins() -> None:
    assert lookup([TCP_HIGH, ANY], 0, TCP_PACKET, 0) is TCP_HIGH
    assert lookup([ANY, TCP_HIGH], 0, TCP_PACKET, 0) is TCP_HIGH
    assert lookup([ANY, TCP_HIGH], 0, {"eth_type": 0x806}, 0) is ANY


def test_tie_at_the_top_priority_is_ambiguous() -> None:
    with pytest.raises(AmbiguousLookupError):
        lookup([ANY, IPV4], 0, TCP_PACKET, 0)
    with pytest.raises(AmbiguousLookupError):
        lookup([IPV4, ANY], 0, TCP_PACKET, 0)
    # the same instructions at one priority are not a conflict
    twin = FlowEntry(0, 5, make_match(MatchField("ip_proto", 6)), (GotoTable(1),), Owner.POLICY)
    assert lookup([ANY, twin], 0, TCP_PACKET, 0).instructions == (GotoTable(1),)


def test_tie_below_the_winning_priority_is_not_ambiguous() -> None:
    # OpenFlow picks TCP_HIGH (priority 10); the priority-5 tie never matters.
    assert lookup([ANY, IPV4, TCP_HIGH], 0, TCP_PACKET, 0) is TCP_HIGH


def test_table_miss_raises() -> None:
    with pytest.raises(TableMissError):
        lookup([IPV4], 0, {"eth_type": 0x806}, 0)
    with pytest.raises(TableMissError):
        run_packet([], {"eth_type": 0x800})


def test_metadata_is_written_under_its_mask_and_matched() -> None:
    classify = FlowEntry(
        0, 1, make_match(), (WriteMetadata(0x1FF, 0xFF), GotoTable(1)), Owner.POLICY
    )
    mark = FlowEntry(
        1,
        1,
        make_match(MatchField("metadata", 0xFF, 0xFF)),
        (ApplyActions((SetQueue(7),)),),
        Owner.PIPELINE,
    )
    verdict = run_packet([classify, mark], {"eth_type": 0x800})
    assert verdict.metadata == 0xFF
    assert verdict.queue_id == 7
    assert verdict.outputs == ()


def test_goto_backwards_is_refused() -> None:
    loop = FlowEntry(1, 1, make_match(), (GotoTable(0),), Owner.POLICY)
    start = FlowEntry(0, 1, make_match(), (GotoTable(1),), Owner.POLICY)
    with pytest.raises(RuntimeError, match="goes backwards"):
        run_packet([start, loop], {})
