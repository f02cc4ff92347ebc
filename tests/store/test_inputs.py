"""A switch's plan inputs, groups and meters survive its report's JSON and Redis unchanged,
and a report written before they existed still reads (without them)."""

from __future__ import annotations

import json

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.fabric.model import Link, PortRef, Topology
from controller.flowid import ETH_TYPE_IPV6, IP_PROTO_UDP, FlowId
from controller.pipeline.desired import FabricInputs
from controller.pipeline.flows import Group, Learn, Output, Resubmit, SetField, SetQueue
from controller.pipeline.groups import Bucket, GroupEntry, GroupType, MeterEntry
from controller.pipeline.plan import PortState, SwitchInputs
from controller.store.groups import GroupRecord
from controller.store.inputs import INPUTS_RECORD, InputsRecord
from controller.store.switches import SwitchReport, SwitchStore
from tests.support.plan_inputs import switch_inputs

PROPERTY = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

u32 = st.integers(0, 2**32 - 1)
actions = st.one_of(
    st.builds(SetField, st.sampled_from(["ip_dscp", "eth_dst"]), u32),
    st.builds(SetQueue, u32),
    st.builds(Output, u32),
    st.builds(Learn, u32, u32, u32, u32, st.integers(0, 2**64 - 1), u32),
    st.builds(Resubmit, u32),
    st.builds(Group, u32),
)
groups = st.builds(
    GroupEntry,
    st.sampled_from(list(GroupType)),
    st.lists(
        st.builds(Bucket, st.lists(actions, max_size=4).map(tuple), st.none() | u32, u32),
        max_size=4,
    ).map(tuple),
    st.integers(0, 0xFFFFFF00),
)
meters = st.builds(MeterEntry, u32, u32, u32)


@PROPERTY
@given(switch_inputs())
def test_switch_inputs_round_trip_through_their_record(inputs: SwitchInputs) -> None:
    record = InputsRecord.of(inputs)
    back = INPUTS_RECORD.validate_json(INPUTS_RECORD.dump_json(record, by_alias=True)).inputs()
    assert back == inputs
    # the parts compared one by one too (a mapping proxy compares by content)
    assert back.overrides == inputs.overrides
    if inputs.fabric is not None:
        assert back.fabric is not None
        assert back.fabric.topology == inputs.fabric.topology
        assert back.fabric.topology.usable_links == inputs.fabric.topology.usable_links
        assert dict(back.fabric.topology.capacity_bps) == dict(inputs.fabric.topology.capacity_bps)


@PROPERTY
@given(inputs=switch_inputs(), held=st.lists(groups, max_size=3), metered=st.lists(meters))
def test_a_report_keeps_its_inputs_groups_and_meters_through_redis(
    redis_client: redis.Redis,
    inputs: SwitchInputs,
    held: list[GroupEntry],
    metered: list[MeterEntry],
) -> None:
    store = SwitchStore(redis_client)
    store.heartbeat("c1")
    sent = SwitchReport(
        dpid=inputs.dpid,
        controller="c1",
        connected_at=1.5,
        applied_version=inputs.policy_version,
        groups=tuple(GroupRecord.of(group) for group in held),
        meters=tuple(metered),
        inputs=InputsRecord.of(inputs),
    )
    store.report(sent)
    [read] = store.all()
    assert read == sent
    assert read.inputs is not None and read.inputs.inputs() == inputs
    assert '"class":' in sent.to_json() or not inputs.overrides  # the alias, as records spell it
    assert [record.entry() for record in read.groups] == held


def test_the_records_read_as_plain_json() -> None:
    """What an operator finds in Redis: flows as number lists, ports and links by name."""
    flow = FlowId(ETH_TYPE_IPV6, IP_PROTO_UDP, 1, 2**128 - 1, 4791, 4791)
    a, b = PortRef(1, 3), PortRef(2, 1)
    inputs = SwitchInputs(
        1,
        (PortState(3, "s1-eth3", 10**9, up=False, hw_addr=5),),
        {flow: "training"},
        FabricInputs(
            Topology(frozenset({1, 2}), frozenset({Link(a, b)}), capacity_bps={a: 10**9}),
            frozenset({3}),
            {flow: ((1, 3), (2, 2))},
        ),
        policy_version=4,
        jobs_version=2,
    )
    document = json.loads(INPUTS_RECORD.dump_json(InputsRecord.of(inputs), by_alias=True))
    assert document == {
        "dpid": 1,
        "ports": [{"number": 3, "name": "s1-eth3", "link_bps": 10**9, "up": False, "hw_addr": 5}],
        "overrides": [{"flow": [0x86DD, 17, 1, 2**128 - 1, 4791, 4791], "class": "training"}],
        "fabric": {
            "topology": {
                "switches": [1, 2],
                "links": [{"src": {"dpid": 1, "port": 3}, "dst": {"dpid": 2, "port": 1}}],
                "hosts": [],
                "capacities": [{"port": {"dpid": 1, "port": 3}, "bps": 10**9}],
                "default_capacity_bps": 10_000_000_000,
            },
            "edge_ports": [3],
            "pinned": [{"flow": [0x86DD, 17, 1, 2**128 - 1, 4791, 4791], "path": [[1, 3], [2, 2]]}],
        },
        "policy_version": 4,
        "jobs_version": 2,
    }
    group = GroupEntry(GroupType.SELECT, (Bucket((Output(3),), watch_port=3),))
    assert json.loads(SwitchReport(1, "c", 0.0, None, groups=(GroupRecord.of(group),)).to_json())[
        "groups"
    ] == [
        {
            "group_id": group.group_id,
            "type": "select",
            "buckets": [{"actions": [{"port": 3}], "watch_port": 3, "weight": 1}],
        }
    ]


def test_a_report_of_an_older_controller_reads_without_inputs() -> None:
    """Written before reports carried inputs, groups and meters: none of them."""
    raw = (
        '{"dpid": 1, "controller": "c1", "connected_at": 1.0, "applied_version": 3,'
        ' "ports": [{"name": "s1-eth1", "number": 1, "link_bps": null}],'
        ' "datapath_type": "netdev", "updated_at": 2.0, "flows": [[2, 0, [], 7]]}'
    )
    report = SwitchReport.from_json(raw)
    assert (report.inputs, report.groups, report.meters) == (None, (), ())
    assert report.flows == ((2, 0, (), 7),)
