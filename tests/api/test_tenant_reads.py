"""Tenants read only their own jobs, flows and events, on every read route.

The walk is generated from the app's OpenAPI document: every GET route is
either filtered by tenant (``SCOPED``) or listed as tenant-agnostic with the
reason (``AGNOSTIC``), and every parameter it takes has the values to try in
``PARAMETERS``; a new route or parameter fails the walk until it is
classified. Tenant red's jobs, flows, hosts and events are seeded first,
and no answer to tenant blue's tokens may carry any of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient

from controller.api.routes.events import collect
from controller.api.routes.fabric import scoped_snapshot
from controller.auth.model import Principal, Role, networks_of
from controller.auth.tenancy import FLOW_EVENTS, SHARED_EVENTS, Scope, flow_ends
from controller.fabric.model import Host, Link, PortRef, Topology
from controller.fabric.snapshot import FabricSnapshot, build_snapshot, pinned_view
from controller.flowid import FlowId
from controller.policy.tenants import Tenant
from controller.store.events import Event, EventStore
from controller.store.fabric import FabricStore
from controller.store.flows import FlowStore
from controller.store.jobs import JobStore
from tests.api.conftest import ReportSwitch, bearer
from tests.api.test_flows import FLOW

TENANTS = {"blue": {"networks": ["10.1.0.0/16"]}, "red": {"networks": ["10.2.0.0/16"]}}
DPID = 0x2A

# What tenant blue must never read: red's job names, red's hosts (addresses and MACs), and an
# unscoped token's job (a tenant sees its own jobs only).
RED_JOB, RED_GONE, RED_EXPIRED, OPS_JOB = "red-secret-job", "red-gone-job", "red-old-job", "ops-job"
RED_A, RED_B, RED_MAC = "10.2.77.5", "10.2.77.6", "00:00:00:00:77:05"
FORBIDDEN = (RED_JOB, RED_GONE, RED_EXPIRED, OPS_JOB, "10.2.77.", RED_MAC, "10.9.9.9")
BLUE_JOB, BLUE_A, BLUE_B = "blue-job", "10.1.0.5", "10.1.0.6"
DECOYS = {
    # For a value naming red's data, one naming nothing: an answer about red's must be the
    # answer about nothing, but for the value the caller sent, which it may echo.
    RED_JOB: "no-such-job",
    RED_GONE: "no-such-job",
    RED_EXPIRED: "no-such-job",
    OPS_JOB: "no-such-job",
    RED_A: "10.3.3.3",
    RED_B: "10.3.3.4",
    RED_MAC: "00:00:00:00:99:99",
    "10.9.9.9": "10.3.3.5",
}

# --------------------------------------------------------------------------------------------
# the classification of every GET route
# --------------------------------------------------------------------------------------------

SCOPED = {
    "/v1/jobs": "jobs of the caller's tenant only",
    "/v1/jobs/{name}": "another tenant's job is 404, as if absent",
    "/v1/flows": "flows with an end in the tenant's networks",
    "/v1/events": "the tenant's jobs, flows and hosts, and the shared fabric's events",
    "/v1/topology": "every switch and link; the tenant's own hosts and pinned elephants",
    "/v1/paths": "paths between two hosts one of which is the tenant's",
}
AGNOSTIC = {
    "/healthz": "a fixed liveness answer",
    "/readyz": "the ids of the live controllers",
    "/v1/policy": "the policy every viewer reads; it declares networks, holds no job or flow",
    "/v1/policy/history": "versions, authors and comments of the policy",
    "/v1/switches": "ports, queue settings and a flow count of each switch: shared hardware",
    "/v1/switches/{dpid}/queues": "per-class queue counters of a port: shared hardware",
    "/v1/controllers": "controller instances and the switches each masters: shared control",
    "/metrics": "request counts by route template and status",
    "/v1/tokens": "admin only, and a tenant's token is never admin",
    "/v1/audit": "admin only, and a tenant's token is never admin",
}
PARAMETERS: dict[str, list[str]] = {
    # every value is one a tenant might try to reach another tenant's data with
    "name": [RED_JOB, RED_GONE, RED_EXPIRED, OPS_JOB, BLUE_JOB],
    "dpid": [f"{DPID:016x}"],
    "switch": [f"{DPID:016x}"],
    "class": ["training", "inference"],
    "min_bytes": ["0"],
    "limit": ["1000"],
    "since": ["0-0"],
    "kind": ["job", "reclassified", "placement", "reroute", "host", "link"],
    "src": [RED_A, RED_MAC, "10.9.9.9", BLUE_A],
    "dst": [RED_B, "10.9.9.9", BLUE_B],
}


def get_operations() -> dict[str, list[dict[str, Any]]]:
    """Every GET route of the OpenAPI document, with its parameters."""
    from controller.api.app import create_app
    from controller.api.settings import ApiSettings

    schema = create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0")).openapi()
    return {
        path: methods["get"].get("parameters", [])
        for path, methods in schema["paths"].items()
        if "get" in methods
    }


GETS = get_operations()


def requests_for(path: str, parameters: list[dict[str, Any]]) -> Iterator[str]:
    """The URLs to try on one route: every combination of its path and required query
    parameters' values, then each optional query parameter's values on their own."""
    for parameter in parameters:
        assert parameter["name"] in PARAMETERS, (
            f"{path}: parameter {parameter['name']!r} has no values to try: add it to"
            " PARAMETERS with the values a tenant would try to read another's data with"
        )
    required = [p for p in parameters if p["in"] == "path" or p.get("required")]
    optional = [p for p in parameters if p["in"] == "query" and not p.get("required")]
    for values in itertools.product(*(PARAMETERS[p["name"]] for p in required)):
        base = path
        query = []
        for parameter, value in zip(required, values, strict=True):
            if parameter["in"] == "path":
                base = base.replace("{" + parameter["name"] + "}", value)
            else:
                query.append(f"{parameter['name']}={value}")
        yield base + ("?" + "&".join(query) if query else "")
        for parameter in optional:
            for value in PARAMETERS[parameter["name"]]:
                joined = "&".join([*query, f"{parameter['name']}={value}"])
                yield f"{base}?{joined}"


def test_every_get_route_is_classified_with_a_reason() -> None:
    assert not SCOPED.keys() & AGNOSTIC.keys()
    unclassified = GETS.keys() - SCOPED.keys() - AGNOSTIC.keys()
    assert not unclassified, f"classify these GET routes in SCOPED or AGNOSTIC: {unclassified}"
    assert not (SCOPED.keys() | AGNOSTIC.keys()) - GETS.keys(), "a classified route is gone"
    assert all(reason.strip() for reason in (*SCOPED.values(), *AGNOSTIC.values()))


# --------------------------------------------------------------------------------------------
# seeding: two tenants' jobs, flows, hosts and events, and an unscoped job
# --------------------------------------------------------------------------------------------


def _ip(text: str) -> int:
    a, b, c, d = (int(part) for part in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


HOSTS = (
    Host(0x7705, PortRef(1, 1), _ip(RED_A)),  # RED_MAC
    Host(0x7706, PortRef(2, 1), _ip(RED_B)),
    Host(0x010005, PortRef(1, 2), _ip(BLUE_A)),
    Host(0x010006, PortRef(2, 2), _ip(BLUE_B)),
    Host(0x0A0A0A, PortRef(2, 3), None),  # known by its MAC alone: nobody's
)
CABLE = (PortRef(1, 9), PortRef(2, 9))


def pinned(src: str, dst: str) -> Any:
    return pinned_view(
        FlowId(0x0800, 6, _ip(src), _ip(dst), 40000, 5201),
        traffic_class="training",
        rate_bps=9e8,
        demand_bps=1e9,
        since=990.0,
        path=((1, 9), (2, 1)),
        port_names={},
    )


def flow_text(src: str, dst: str) -> str:
    return f"tcp {src}:40000 > {dst}:5201"


def seed(client: TestClient, redis_client: redis.Redis, report_switch: ReportSwitch) -> None:
    red = bearer(redis_client, Role.operator, tenant="red", name="red-op")
    blue = bearer(redis_client, Role.operator, tenant="blue", name="blue-op")
    for name, headers, ends in (
        (RED_JOB, red, (RED_A, RED_B)),
        (RED_GONE, red, (RED_A,)),
        (BLUE_JOB, blue, (BLUE_A, BLUE_B)),
        (OPS_JOB, None, ("10.9.9.9",)),
    ):
        job = {
            "name": name,
            "class": "training",
            "endpoints": [{"ipv4": end, "ports": [4791]} for end in ends],
        }
        answer = client.post("/v1/jobs", json=job, headers=headers)
        assert answer.status_code == 201, answer.text
    assert client.delete(f"/v1/jobs/{RED_GONE}", headers=red).status_code == 204
    JobStore(redis_client).put(
        RED_EXPIRED,
        {"class": "training", "endpoints": [{"ipv4": f"{RED_A}/32", "ports": None}], "ttl": 1.0},
        1,
        now=1000.0,
        tenant="red",
    )
    assert client.get("/v1/jobs").status_code == 200  # purges it: an ``expired`` event

    report_switch(DPID)
    FlowStore(redis_client).publish(
        DPID,
        [
            replace(FLOW, src=RED_A, dst=RED_B, src_port=1, why=f"job:{RED_JOB}"),
            replace(FLOW, src=BLUE_A, dst=BLUE_B, src_port=2, why=f"job:{BLUE_JOB}"),
        ],
    )
    FabricStore(redis_client).publish(
        build_snapshot(
            "ctl-1",
            1000.0,
            Topology(
                switches=frozenset({1, 2}),
                links=frozenset({Link(*CABLE), Link(CABLE[1], CABLE[0])}),
                hosts=HOSTS,
            ),
            {},
            {},
            [pinned(RED_A, RED_B), pinned(BLUE_A, BLUE_B)],
        )
    )
    events = EventStore(redis_client)
    for src, dst in ((RED_A, RED_B), (BLUE_A, BLUE_B)):
        flow = flow_text(src, dst)
        events.append("reclassified", {"switch": f"{DPID:016x}", "flow": flow, "to": "training"})
        events.append("placement", {"op": "pinned", "flow": flow, "reason": "elephant"})
        events.append("reroute", {"flow": flow, "from_path": "s1-eth9", "reason": "link down"})
    events.append("host", {"op": "learned", "mac": RED_MAC, "ipv4": RED_A, "at": "1:1"})
    events.append("host", {"op": "learned", "mac": "00:00:00:01:00:05", "ipv4": BLUE_A})
    events.append("link", {"op": "up", "a": "0000000000000001:9", "b": "0000000000000002:9"})


@pytest.fixture
def seeded(
    client: TestClient,
    document: dict[str, Any],
    redis_client: redis.Redis,
    report_switch: ReportSwitch,
) -> TestClient:
    answer = client.put("/v1/policy", json={**document, "tenants": TENANTS})
    assert answer.status_code == 201, answer.text
    seed(client, redis_client, report_switch)
    return client


# --------------------------------------------------------------------------------------------
# the walk
# --------------------------------------------------------------------------------------------


def test_no_get_route_gives_a_tenant_another_tenants_jobs_flows_or_events(
    seeded: TestClient, redis_client: redis.Redis
) -> None:
    tokens = {
        "blue viewer": bearer(redis_client, Role.viewer, tenant="blue"),
        "blue operator": bearer(redis_client, Role.operator, tenant="blue"),
    }
    admin_saw: dict[str, bool] = {}
    calls = 0
    for path, parameters in sorted(GETS.items()):
        for url in requests_for(path, parameters):
            sent = [value for value in DECOYS if value in url]
            decoy_url = url
            for value in sent:
                decoy_url = decoy_url.replace(value, DECOYS[value])
            for who, headers in tokens.items():
                answer = seeded.get(url, headers=headers)
                calls += 1
                assert answer.status_code < 500, (who, url, answer.text)
                if sent:  # red's job or host is answered as nothing would be
                    decoy = seeded.get(decoy_url, headers=headers)
                    assert answer.status_code == decoy.status_code, (who, url, answer.text)
                leaked = [marker for marker in FORBIDDEN if marker in unechoed(answer.text, sent)]
                assert not leaked, f"{who} read {leaked} from GET {url}: {answer.text[:400]}"
            if path in SCOPED:
                text = unechoed(seeded.get(url).text, sent)
                admin_saw[path] = admin_saw.get(path, False) or any(
                    marker in text for marker in FORBIDDEN
                )
    assert calls > 2 * len(GETS)  # every route, most with several values
    # Red's data is there to be read, by an unscoped token: blue's answers were filtered.
    assert admin_saw == dict.fromkeys(SCOPED, True)


def unechoed(text: str, sent: list[str]) -> str:
    """An answer without the values the caller sent (a 404 may name what it did not find)."""
    for value in sent:
        text = text.replace(value, "")
    return text


def test_a_tenant_still_reads_its_own(seeded: TestClient, redis_client: redis.Redis) -> None:
    blue = bearer(redis_client, Role.viewer, tenant="blue")
    assert [j["name"] for j in seeded.get("/v1/jobs", headers=blue).json()["jobs"]] == [BLUE_JOB]
    assert seeded.get(f"/v1/jobs/{BLUE_JOB}", headers=blue).status_code == 200
    assert [f["src"] for f in seeded.get("/v1/flows", headers=blue).json()["flows"]] == [BLUE_A]

    events = seeded.get("/v1/events?limit=1000", headers=blue).json()["events"]
    seen = [
        (e["kind"], e.get("op"), e.get("name") or e.get("flow") or e.get("ipv4")) for e in events
    ]
    blue_flow = flow_text(BLUE_A, BLUE_B)
    assert seen == [
        ("policy", None, None),
        ("job", "registered", BLUE_JOB),
        ("reclassified", None, blue_flow),
        ("placement", "pinned", blue_flow),
        ("reroute", None, blue_flow),
        ("host", "learned", BLUE_A),
        ("link", "up", None),
    ]
    registered = events[1]
    assert registered["tenant"] == "blue" and registered["class"] == "training"

    topology = seeded.get("/v1/topology", headers=blue).json()
    assert [host["ipv4"] for host in topology["hosts"]] == [BLUE_A, BLUE_B]
    assert [(pin["src"], pin["dst"]) for pin in topology["pinned"]] == [(BLUE_A, BLUE_B)]
    assert len(topology["links"]) == 2 and topology["switches"] == [1, 2]

    # Paths between the hosts its topology shows; another tenant's host is unknown to it.
    own = seeded.get(f"/v1/paths?src={BLUE_A}&dst={BLUE_B}", headers=blue)
    assert own.status_code == 200 and own.json()["pinned"][0]["src"] == BLUE_A
    theirs = seeded.get(f"/v1/paths?src={BLUE_A}&dst={RED_A}", headers=blue)
    assert theirs.status_code == 404
    assert theirs.json()["detail"] == (
        f"dst: no host with IPv4 {RED_A} is known to controller ctl-1"
    )
    assert seeded.get(f"/v1/paths?src={BLUE_A}&dst={RED_A}").status_code == 200  # unscoped


def test_a_follower_moves_past_events_it_may_not_read(
    seeded: TestClient, redis_client: redis.Redis
) -> None:
    """``flowlane events --follow`` polls with ``since``: a page of other tenants' events
    answers nothing, yet ``last_id`` moves on, so the next poll does not read them again."""
    blue = bearer(redis_client, Role.viewer, tenant="blue")
    everything = seeded.get("/v1/events?limit=1000").json()
    last = everything["last_id"]
    red_events = EventStore(redis_client)
    for _ in range(3):
        red_events.append("reclassified", {"flow": flow_text(RED_A, RED_B), "to": "training"})
    page = seeded.get(f"/v1/events?since={last}", headers=blue).json()
    assert page["events"] == [] and page["last_id"] != last
    assert seeded.get(f"/v1/events?since={page['last_id']}").json()["events"] == []


# --------------------------------------------------------------------------------------------
# the pure parts
# --------------------------------------------------------------------------------------------

BLUE = Scope.of(
    Principal("b", Role.viewer, "blue"),
    {"blue": Tenant.model_validate({"networks": ["10.1.0.0/16"]})},
)


@pytest.mark.parametrize(
    ("text", "ends"),
    [
        ("tcp 10.0.0.1:40000 > 10.0.0.2:5201", ("10.0.0.1", "10.0.0.2")),
        ("udp [fe80::1]:53 > [2001:db8::2]:1234", ("fe80::1", "2001:db8::2")),
        ("47 10.0.0.1:0 > 10.0.0.2:0", ("10.0.0.1", "10.0.0.2")),
        ("tcp 10.0.0.1:40000", None),
        ("", None),
        (None, None),
        (42, None),
    ],
)
def test_flow_ends_reads_what_flow_id_prints(text: object, ends: tuple[str, str] | None) -> None:
    assert flow_ends(text) == ends


def test_flow_ends_reads_a_real_flow_id() -> None:
    flow = FlowId(0x0800, 17, _ip("10.1.0.1"), _ip("10.2.0.1"), 5, 6)
    assert flow_ends(str(flow)) == ("10.1.0.1", "10.2.0.1")


@pytest.mark.parametrize(
    ("kind", "data", "seen"),
    [
        ("job", {"name": "j", "op": "registered", "tenant": "blue"}, True),
        ("job", {"name": "j", "op": "registered", "tenant": "red"}, False),
        ("job", {"name": "j", "op": "deleted"}, False),  # unscoped, or written before tenants
        ("job", {"name": "j", "tenant": ["blue"]}, False),
        ("reclassified", {"flow": "tcp 10.1.0.1:1 > 10.9.0.1:2"}, True),
        ("reclassified", {"flow": "tcp 10.9.0.1:1 > 10.1.0.1:2"}, True),
        ("reclassified", {"flow": "tcp 10.2.0.1:1 > 10.9.0.1:2"}, False),
        ("placement", {"flow": "garbled"}, False),
        ("reroute", {}, False),
        ("host", {"ipv4": "10.1.0.9", "mac": "m"}, True),
        ("host", {"ipv4": "10.1.0.9", "previous_ipv4": "10.2.0.9"}, False),
        ("host", {"ipv4": None, "mac": "m"}, False),
        ("policy", {"version": 3, "author": "admin"}, True),
        ("link", {"op": "down"}, True),
        ("some-new-kind", {"anything": 1}, False),  # unknown: no tenant's until classified
    ],
)
def test_which_events_a_tenant_sees(kind: str, data: dict[str, Any], seen: bool) -> None:
    assert BLUE.sees_event(kind, data) is seen
    assert Scope().sees_event(kind, data) is True  # an unscoped token sees every event


def test_every_kind_the_code_writes_is_classified() -> None:
    from controller.fabric.snapshot import FABRIC_EVENT_KINDS

    written = {"policy", "job", "reclassified", "queue-drops", "switch-refused"}
    written |= {"mastership"}
    written |= {"store-regression", "store-recovered", *FABRIC_EVENT_KINDS}
    classified = SHARED_EVENTS | FLOW_EVENTS | {"job", "host"}
    assert written <= classified


def test_collect_skips_what_the_scope_may_not_see_and_reads_on() -> None:
    stream = [
        Event(f"{i}-0", "reclassified", 0.0, {"flow": f"tcp 10.{net}.0.1:1 > 10.9.0.1:2"})
        for i, net in enumerate([2, 2, 1, 2, 1, 2], start=1)
    ]

    def read(since: str | None, count: int) -> list[Event]:
        start = 0 if since is None else int(since.split("-")[0])
        return stream[start : start + count]

    found, cursor = collect(read, None, 1, scope=BLUE)
    assert [event.id for event in found] == ["3-0"] and cursor == "3-0"
    found, cursor = collect(read, cursor, 10, scope=BLUE)
    assert [event.id for event in found] == ["5-0"] and cursor == "6-0"


def test_a_scoped_snapshot_keeps_the_fabric_and_the_tenants_own_hosts_and_pins() -> None:
    snapshot = FabricSnapshot.model_validate(
        build_snapshot(
            "c",
            1.0,
            Topology(switches=frozenset({1, 2}), links=frozenset({Link(*CABLE)}), hosts=HOSTS),
            {},
            {},
            [pinned(RED_A, RED_B), pinned(BLUE_A, RED_A)],
        ).model_dump()
    )
    scoped = scoped_snapshot(snapshot, BLUE)
    assert [host.ipv4 for host in scoped.hosts] == [BLUE_A, BLUE_B]
    assert [(pin.src, pin.dst) for pin in scoped.pinned] == [(BLUE_A, RED_A)]
    assert (scoped.switches, scoped.links) == (snapshot.switches, snapshot.links)
    assert scoped_snapshot(snapshot, Scope()) is snapshot
    assert BLUE.networks == networks_of(["10.1.0.0/16"])
