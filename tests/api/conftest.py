"""An API app on the test Redis, a valid document to break, and switches that report to it."""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from controller.api.app import create_app
from controller.api.settings import ApiSettings
from controller.auth.model import Role
from controller.flowid import FlowId
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState, SwitchInputs, plan
from controller.policy.jobs import JobSpec
from controller.policy.load import parse_policy
from controller.qos.plan import QueueSpec
from controller.store.groups import GroupRecord
from controller.store.inputs import InputsRecord
from controller.store.policies import PolicyStore
from controller.store.switches import PortReport, SwitchReport, SwitchStore
from controller.store.tokens import TokenStore

DOCUMENT: dict[str, Any] = {
    "classes": {
        "inference": {"priority": 0, "dscp": 46, "min_rate": "20%"},
        "training": {"priority": 1, "dscp": 26, "min_rate": "70%"},
        "best-effort": {"priority": 2, "dscp": 0, "min_rate": "10%", "max_rate": "50%"},
    },
    "default_class": "inference",
    "rules": [
        {"name": "rocev2", "match": {"ip_proto": "udp", "udp_dst": 4791}, "class": "training"},
        {"name": "triton", "match": {"tcp_dst": [8000, 8001]}, "class": "inference"},
        {"name": "ssh", "match": {"tcp_dst": 22}, "class": "best-effort"},
    ],
    "ports": {"rate": "10Gbit", "overrides": {"s1-eth3": "50Mbit"}},
}

PORTS = (
    PortReport("s1-eth1", 1, 10_000_000_000),
    PortReport("s1-eth2", 2, 1_000_000_000),
    PortReport("s1-eth3", 3, 10_000_000_000),
)


@pytest.fixture
def document() -> dict[str, Any]:
    """A fresh valid policy document each test may change."""
    return copy.deepcopy(DOCUMENT)


@pytest.fixture
def settings(redis_url: str) -> ApiSettings:
    return ApiSettings(redis_url=redis_url, registry=CollectorRegistry())


def bearer(
    client: redis.Redis,
    role: Role = Role.admin,
    tenant: str | None = None,
    name: str | None = None,
) -> dict[str, str]:
    """The header of a new token of ``role`` (named after it, or ``name``) in the store."""
    name = name or f"test-{role.name}" + (f"-{tenant}" if tenant else "")
    _, secret = TokenStore(client).create(name, role, tenant=tenant)
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def client(redis_client: redis.Redis, settings: ApiSettings) -> Iterator[TestClient]:
    """The app on an empty Redis (``redis_client`` flushed it), calling as an admin."""
    with TestClient(create_app(settings), headers=bearer(redis_client)) as test_client:
        yield test_client


@pytest.fixture
def anonymous(redis_client: redis.Redis, settings: ApiSettings) -> Iterator[TestClient]:
    """The app (an instance of its own, beside ``client``'s), called without a token."""
    own = dataclasses.replace(settings, registry=CollectorRegistry())
    with TestClient(create_app(own)) as test_client:
        yield test_client


@pytest.fixture
def policies(redis_client: redis.Redis) -> PolicyStore:
    return PolicyStore(redis_client)


@pytest.fixture
def switches(redis_client: redis.Redis) -> SwitchStore:
    return SwitchStore(redis_client)


ReportSwitch = Callable[..., SwitchReport]


@pytest.fixture
def report_switch(switches: SwitchStore) -> ReportSwitch:
    """Write a switch report (and its controller's heartbeat) as a live controller would."""

    def report(
        dpid: int,
        *,
        applied: int | None = None,
        controller: str = "ctl-1",
        beat: float | None = None,
        ports: tuple[PortReport, ...] = PORTS,
        flows: tuple[Any, ...] = (),
        published: bool = True,
    ) -> SwitchReport:
        """``published``: with the plan inputs a controller publishes (its ports, all up, no
        overrides, no fabric); without them, a report as an older controller wrote it."""
        switches.heartbeat(controller, now=beat if beat is not None else time.time())
        inputs = SwitchInputs(dpid, port_states(ports), policy_version=applied)
        sent = SwitchReport(
            dpid=dpid,
            controller=controller,
            connected_at=1_700_000_000.0,
            applied_version=applied,
            ports=ports,
            flows=flows,
            datapath_type="netdev",
            inputs=InputsRecord.of(inputs) if published else None,
        )
        switches.report(sent)
        return sent

    return report


def port_states(
    ports: tuple[PortReport, ...], down: frozenset[str] = frozenset()
) -> tuple[PortState, ...]:
    """The ports as a controller keeps them (up unless named in ``down``)."""
    return tuple(
        PortState(port.number, port.name, port.link_bps, up=port.name not in down) for port in ports
    )


def synced_report(
    dpid: int,
    document: dict[str, Any],
    applied: int,
    *,
    overrides: Mapping[FlowId, str] | None = None,
    jobs: Sequence[JobSpec] = (),
    fabric: FabricInputs | None = None,
    down: frozenset[str] = frozenset(),
) -> SwitchReport:
    """A switch that holds exactly what the controller plans for ``document`` (flows, groups,
    meters and queues) from the given detector overrides, jobs and fabric, and publishes those
    inputs with its report as the controller does."""
    policy = parse_policy(document)
    inputs = SwitchInputs(
        dpid, port_states(PORTS, down), dict(overrides or {}), fabric, policy_version=applied
    )
    planned = plan(policy, jobs, inputs)
    ports = []
    for port in PORTS:
        qos = planned.qos[port.name]
        queues = tuple(
            QueueSpec(q.queue_id, q.class_name, q.min_bps, q.max_bps, q.priority, q.dscp)
            for q in qos.queues
        )
        ports.append(PortReport(port.name, port.number, port.link_bps, qos.rate_bps, queues))
    flows = tuple(
        (f.table_id, f.priority, tuple((m.name, m.value, m.mask) for m in f.match), f.cookie)
        for f in planned.desired.flows
    )
    return SwitchReport(
        dpid,
        "ctl-1",
        1_700_000_000.0,
        applied,
        tuple(ports),
        flows,
        "netdev",
        groups=tuple(GroupRecord.of(group) for group in planned.desired.groups),
        meters=planned.desired.meters,
        inputs=InputsRecord.of(inputs),
    )


@pytest.fixture
def synced_switch(switches: SwitchStore) -> Callable[[int, dict[str, Any], int], SwitchReport]:
    def write(dpid: int, document: dict[str, Any], applied: int) -> SwitchReport:
        switches.heartbeat("ctl-1")
        report = synced_report(dpid, document, applied)
        switches.report(report)
        return report

    return write


@pytest.fixture
def down_client(unused_port: int) -> Iterator[TestClient]:
    """An app whose Redis port nobody listens on (yet), called with a token it cannot check:
    the check itself needs Redis, so every route but the probes is 503."""
    settings = ApiSettings(
        redis_url=f"redis://127.0.0.1:{unused_port}/0", registry=CollectorRegistry()
    )
    with TestClient(create_app(settings), headers={"Authorization": "Bearer flt_x"}) as client:
        yield client
