"""One record per concept: each survives Redis (the store's own encoding, on a real Redis),
the API's answer and the CLI's reading unchanged, and documents an older controller wrote
still read.

The records are queue statistics (``QueueStats``), a tracked flow (``FlowRecord``, derived
from the controller's ``ObservedFlow``), a queue spec (``QueueSpec``, what a switch
report lists) and a switch report (``SwitchReport``).
"""

from __future__ import annotations

import ipaddress
import json
import math
from typing import Any

import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from controller.api.routes.flows import flow_json
from controller.api.routes.switches import switch_out
from controller.api.schemas import FlowsOut, SwitchOut, SwitchQueuesOut
from controller.classify.records import FlowRecord, ObservedFlow
from controller.cli.top import top_view
from controller.flowid import ETH_TYPE_IPV4, ETH_TYPE_IPV6, FlowId
from controller.qos.plan import QueueSpec
from controller.qos.records import QueueStats
from controller.store.flows import FlowStore
from controller.store.queues import QueueStore
from controller.store.switches import PortReport, SwitchReport, SwitchStore

PROPERTY = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    # The Redis client is emptied per test, not per example; every example writes whole
    # documents under its own keys, so one example's data cannot leak into the next.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

u64 = st.integers(min_value=0, max_value=2**64 - 1)
small = st.integers(min_value=0, max_value=2**31)
finite = st.floats(allow_nan=False, allow_infinity=False)
names = st.text(min_size=1, max_size=20)

queue_stats = st.builds(
    QueueStats,
    port=names,
    traffic_class=names,
    queue_id=st.integers(min_value=0, max_value=0xFFFE),
    bytes=u64,
    packets=u64,
    drops=u64,
    overlimits=u64,
    backlog_bytes=u64,
    backlog_packets=u64,
    rate_bps=st.none() | finite,
    at=finite,
    min_bps=u64,
    priority=st.integers(min_value=0, max_value=7),
)


@st.composite
def flow_ids(draw: st.DrawFn) -> FlowId:
    eth_type = draw(st.sampled_from((ETH_TYPE_IPV4, ETH_TYPE_IPV6)))
    bits = 32 if eth_type == ETH_TYPE_IPV4 else 128
    address = st.integers(min_value=0, max_value=2**bits - 1)
    port = st.integers(min_value=0, max_value=0xFFFF)
    return FlowId(
        eth_type,
        draw(st.sampled_from((6, 17))),
        draw(address),
        draw(address),
        draw(port),
        draw(port),
    )


observed_flows = st.builds(
    ObservedFlow,
    flow=flow_ids(),
    traffic_class=names,
    why=st.sampled_from(("default", "detected", "rule:triton", "job:allreduce")),
    bytes=u64,
    rate_bps=finite,
    first_seen=finite,
    last_seen=finite,
    packets=u64,
)

queue_specs = st.builds(
    QueueSpec,
    queue_id=st.integers(min_value=0, max_value=0xFFFE),
    class_name=names,
    min_bps=u64,
    max_bps=u64,
    priority=st.integers(min_value=0, max_value=7),
    dscp=st.integers(min_value=0, max_value=63),
)
ports = st.builds(
    PortReport,
    name=names,
    number=st.integers(min_value=1, max_value=0xFFFFFF00),
    link_bps=st.none() | u64,
    rate_bps=st.none() | u64,
    queues=st.lists(queue_specs, max_size=4).map(tuple),
)
match_fields = st.tuples(names, st.integers(min_value=0, max_value=2**128 - 1), st.none() | u64)
installed = st.tuples(
    st.integers(min_value=0, max_value=254),
    st.integers(min_value=0, max_value=0xFFFF),
    st.lists(match_fields, max_size=4).map(tuple),
    u64,
)
switch_reports = st.builds(
    SwitchReport,
    dpid=u64,
    controller=names,
    connected_at=finite,
    applied_version=st.none() | small,
    ports=st.lists(ports, max_size=4).map(tuple),
    flows=st.lists(installed, max_size=6).map(tuple),
    datapath_type=st.none() | st.sampled_from(("system", "netdev")),
    updated_at=finite,
)

QUEUE_WIRE_NAMES = {
    "port", "class", "queue", "bytes", "packets", "drops", "overlimits", "backlog_bytes",
    "backlog_packets", "rate_bps", "at", "min_bps", "priority",
}  # fmt: skip
FLOW_WIRE_NAMES = {
    "switch", "eth_type", "ip_proto", "src", "dst", "src_port", "dst_port", "class", "why",
    "bytes", "rate_bps", "first_seen", "last_seen",
}  # fmt: skip


def api_json(model: Any) -> Any:
    """What FastAPI sends for a response model: its JSON by alias."""
    return json.loads(model.model_dump_json(by_alias=True))


# --------------------------------------------------------------------------------------------
# queue statistics
# --------------------------------------------------------------------------------------------


@PROPERTY
@given(queues=st.lists(queue_stats, max_size=6), updated_at=finite)
def test_queue_stats_round_trip_through_redis(
    redis_client: redis.Redis, queues: list[QueueStats], updated_at: float
) -> None:
    store = QueueStore(redis_client)
    store.publish(0x2A, queues, now=updated_at)
    assert store.get("000000000000002a") == (updated_at, queues)


@PROPERTY
@given(queues=st.lists(queue_stats, min_size=1, max_size=6))
def test_queue_stats_round_trip_through_the_api_and_the_cli(queues: list[QueueStats]) -> None:
    answer = api_json(SwitchQueuesOut(dpid="000000000000002a", updated_at=1.0, queues=queues))
    assert all(set(queue) == QUEUE_WIRE_NAMES for queue in answer["queues"])
    view = top_view({"switches": []}, {"000000000000002a": answer}, {"flows": []})
    assert [row.queue for row in view.queues] == queues
    assert {row.switch for row in view.queues} == {"000000000000002a"}


# --------------------------------------------------------------------------------------------
# a tracked flow
# --------------------------------------------------------------------------------------------


@PROPERTY
@given(seen=observed_flows, dpid=u64)
def test_a_published_flow_is_the_observed_one(seen: ObservedFlow, dpid: int) -> None:
    record = FlowRecord.observed(dpid, seen)
    assert int(record.switch, 16) == dpid
    again = FlowId(
        record.eth_type,
        record.ip_proto,
        int(ipaddress.ip_address(record.src)),
        int(ipaddress.ip_address(record.dst)),
        record.src_port,
        record.dst_port,
    )
    assert again == seen.flow
    assert (record.traffic_class, record.why, record.bytes, record.rate_bps) == (
        seen.traffic_class,
        seen.why,
        seen.bytes,
        seen.rate_bps,
    )
    assert (record.first_seen, record.last_seen) == (seen.first_seen, seen.last_seen)


@PROPERTY
@given(seen=st.lists(observed_flows, max_size=8))
def test_tracked_flows_round_trip_through_redis(
    redis_client: redis.Redis, seen: list[ObservedFlow]
) -> None:
    redis_client.delete("flowlane:flows")
    records = [FlowRecord.observed(0x2A, flow) for flow in seen]
    store = FlowStore(redis_client)
    store.publish(0x2A, records)
    assert store.all() == records
    assert store.all({"000000000000002a"}) == records


@PROPERTY
@given(seen=st.lists(observed_flows, min_size=1, max_size=8))
def test_tracked_flows_round_trip_through_the_api_and_the_cli(seen: list[ObservedFlow]) -> None:
    records = [FlowRecord.observed(0x2A, flow) for flow in seen]
    # GET /v1/flows answers flow_json's values (unvalidated, for speed): they must be what
    # its documented model says, and read back as the same records.
    answer = json.loads(json.dumps({"flows": [flow_json(record) for record in records]}))
    assert all(set(flow) == FLOW_WIRE_NAMES for flow in answer["flows"])
    assert FlowsOut.model_validate(answer).flows == records
    view = top_view({"switches": []}, {}, answer, top=len(records))
    assert sorted(view.flows, key=repr) == sorted(records, key=repr)


def test_a_rate_nobody_could_compute_is_null_in_redis_and_in_the_api(
    redis_client: redis.Redis,
) -> None:
    seen = ObservedFlow(FlowId(ETH_TYPE_IPV4, 6, 1, 2, 3, 4), "c", "default", 1, math.nan, 0, 1)
    store = FlowStore(redis_client)
    store.publish(1, [FlowRecord.observed(1, seen)])
    [read] = store.all()
    assert read.rate_bps is None
    assert flow_json(read)["rate_bps"] is None


# --------------------------------------------------------------------------------------------
# queue spec and switch report
# --------------------------------------------------------------------------------------------


@PROPERTY
@given(report=switch_reports)
def test_switch_reports_round_trip_through_redis(
    redis_client: redis.Redis, report: SwitchReport
) -> None:
    redis_client.delete("flowlane:switches")
    store = SwitchStore(redis_client)
    store.report(report)
    assert store.all() == [report]
    assert SwitchReport.from_json(report.to_json()) == report


@PROPERTY
@given(report=switch_reports, applied=st.none() | small)
def test_switch_reports_round_trip_through_the_api(
    report: SwitchReport, applied: int | None
) -> None:
    answer = api_json(switch_out(report, applied))
    assert SwitchOut.model_validate(answer).ports == list(report.ports)
    assert answer["flow_count"] == len(report.flows)
    assert answer["dpid"] == report.dpid_hex
    spec_names = {"queue_id", "class_name", "min_bps", "max_bps", "priority", "dscp", "jobs"}
    assert all(set(q) == spec_names for port in answer["ports"] for q in port["queues"])


# --------------------------------------------------------------------------------------------
# what the previous version wrote (hand-written serialisers) still reads
# --------------------------------------------------------------------------------------------

LEGACY_QUEUES = (
    '{"updated_at": 1700000000.5, "queues": [{"port": "s1-eth1", "class": "inference",'
    ' "queue": 0, "bytes": 123456, "packets": 789, "drops": 4, "overlimits": 11,'
    ' "backlog_bytes": 3000, "backlog_packets": 2, "rate_bps": 1500000.0,'
    ' "at": 1700000000.25, "min_bps": 20000000, "priority": 0}, {"port": "s1-eth1",'
    ' "class": "training", "queue": 1, "bytes": 10, "packets": 1, "drops": 0,'
    ' "overlimits": 0, "backlog_bytes": 0, "backlog_packets": 0, "rate_bps": null,'
    ' "at": 1700000000.25}]}'
)
"""``QueueStore.publish`` before pydantic (the second queue as the version before
``min_bps`` and ``priority`` wrote it)."""

LEGACY_FLOWS = (
    '{"updated_at": 1700000000.5, "flows": [{"switch": "000000000000002a", "eth_type": 34525,'
    ' "ip_proto": 17, "src": "fe80::1", "dst": "fe80::2", "src_port": 40000,'
    ' "dst_port": 4791, "why": "job:allreduce", "bytes": 1000000000, "rate_bps": NaN,'
    ' "first_seen": 1000.0, "last_seen": 1010.5, "class": "training"}, {"switch":'
    ' "000000000000002a", "eth_type": 2048, "ip_proto": 6, "src": "10.0.0.1", "dst":'
    ' "10.0.0.2", "src_port": 40001, "dst_port": 8000, "why": "default", "bytes": 1500,'
    ' "rate_bps": 12000.0, "first_seen": 1000.0, "last_seen": 1001.0, "class": "inference"}]}'
)
"""``FlowStore.publish`` before pydantic: json.dumps, which wrote a NaN rate as ``NaN``."""

LEGACY_REPORT = (
    '{"dpid": 18446744073709551615, "controller": "ctl-1", "connected_at": 1700000000.5,'
    ' "applied_version": 7, "datapath_type": "netdev", "updated_at": 1700000001.25,'
    ' "ports": [{"name": "s1-eth1", "number": 1, "link_bps": 10000000000, "rate_bps":'
    ' 10000000000, "queues": [{"queue_id": 0, "class_name": "inference", "min_bps": 2000,'
    ' "max_bps": 10000, "priority": 0, "dscp": 46}]}, {"name": "s1-eth2", "number": 2,'
    ' "link_bps": null, "rate_bps": null, "queues": []}], "flows": [[0, 4196,'
    ' [["eth_type", 2048, null], ["tcp_dst", 8000, 65534]], 17366443113094054058],'
    " [2, 0, [], 17366724588070764545]]}"
)
"""``SwitchReport.to_json`` before pydantic."""


def test_queue_stats_an_older_controller_wrote_still_read(redis_client: redis.Redis) -> None:
    redis_client.hset("flowlane:queues", "000000000000002a", LEGACY_QUEUES)
    assert QueueStore(redis_client).get("000000000000002a") == (
        1700000000.5,
        [
            QueueStats(
                "s1-eth1", "inference", 0, 123456, 789, 4, 11, 3000, 2, 1.5e6, 1700000000.25,
                20_000_000, 0,
            ),
            QueueStats("s1-eth1", "training", 1, 10, 1, 0, 0, 0, 0, None, 1700000000.25),
        ],
    )  # fmt: skip


def test_tracked_flows_an_older_controller_wrote_still_read(redis_client: redis.Redis) -> None:
    redis_client.hset("flowlane:flows", "000000000000002a", LEGACY_FLOWS)
    first, second = FlowStore(redis_client).all()
    assert first.rate_bps is not None and math.isnan(first.rate_bps)
    assert flow_json(first)["rate_bps"] is None  # the API still never sends NaN
    assert (first.src, first.traffic_class, first.why) == ("fe80::1", "training", "job:allreduce")
    assert second == FlowRecord(
        "000000000000002a", 0x0800, 6, "10.0.0.1", "10.0.0.2", 40001, 8000,
        "inference", "default", 1500, 12000.0, 1000.0, 1001.0,
    )  # fmt: skip


def test_a_switch_report_an_older_controller_wrote_still_reads(
    redis_client: redis.Redis,
) -> None:
    expected = SwitchReport(
        0xFFFFFFFFFFFFFFFF,
        "ctl-1",
        1700000000.5,
        7,
        (
            PortReport(
                "s1-eth1", 1, 10**10, 10**10, (QueueSpec(0, "inference", 2000, 10000, 0, 46),)
            ),
            PortReport("s1-eth2", 2, None),
        ),
        (
            (0, 4196, (("eth_type", 0x800, None), ("tcp_dst", 8000, 0xFFFE)), 0xF1020000000000AA),
            (2, 0, (), 0xF103000000000001),
        ),
        "netdev",
        1700000001.25,
    )
    redis_client.hset("flowlane:switches", expected.dpid_hex, LEGACY_REPORT)
    assert SwitchStore(redis_client).all() == [expected]
    # And the new encoding is the same document: same names, same values, and the groups,
    # meters and plan inputs that reports carry since (none here), and each queue's jobs
    # (a per-job class's job queues; none here).
    legacy = json.loads(LEGACY_REPORT)
    for port in legacy["ports"]:
        for queue in port["queues"]:
            queue["jobs"] = []
    assert json.loads(expected.to_json()) == {
        **legacy,
        "groups": [],
        "meters": [],
        "inputs": None,
    }


def test_the_wire_names_are_the_ones_the_older_encoders_wrote() -> None:
    queues = json.loads(LEGACY_QUEUES)["queues"][0]
    flows = json.loads(LEGACY_FLOWS)["flows"][1]
    assert set(queues) == QUEUE_WIRE_NAMES
    assert set(flows) == FLOW_WIRE_NAMES
    reader: TypeAdapter[list[QueueStats]] = TypeAdapter(list[QueueStats])
    [stats] = reader.validate_python([queues])
    assert stats.to_dict() == queues
    assert FlowRecord.from_dict(flows).to_dict() == flows
