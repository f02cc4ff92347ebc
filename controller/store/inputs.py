"""A switch's plan inputs as its report stores them: what ``POST /v1/policy/plan`` plans from.

The switch's controller publishes, with every report, exactly the
``SwitchInputs`` its own plan was computed from (ports and their state, the
detector's overrides, the fabric as that switch sees it, the policy and jobs
versions).  The API's dry run calls the same ``plan`` on them, so the two
disagree only when the candidate policy differs.

``SwitchInputs`` holds mappings keyed by flow and a ``Topology`` with a
mapping keyed by port, which JSON cannot key; these records are their
JSON-friendly forms (lists of pairs, sorted so one input always reads the
same), and convert back to the very values they were made from.

The fabric's own snapshot (``controller/fabric/snapshot.py``) is not reused
for the topology: it is a view for operators (names, measured load) and
keeps a capacity only for the source port of each link, with no default,
so it cannot give back the ``Topology`` a switch planned with.  ``PortRef``,
``Link``, ``Host`` and ``FlowId`` serialise as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from pydantic import ConfigDict, Field, TypeAdapter

from controller.fabric.model import Hop, Host, Link, PortRef, Topology
from controller.flowid import FlowId
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState, SwitchInputs
from controller.records import RECORD_CONFIG


@dataclass(frozen=True, slots=True)
class OverrideRecord:
    """A flow detection moved to another class: ``flow`` is
    ``[eth_type, ip_proto, src, dst, src_port, dst_port]`` (addresses as integers)."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    flow: FlowId
    traffic_class: Annotated[str, Field(alias="class")]


@dataclass(frozen=True, slots=True)
class CapacityRecord:
    """The egress rate of one port, as the fabric counts it."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    port: PortRef
    bps: int


@dataclass(frozen=True, slots=True)
class TopologyRecord:
    """A ``Topology``, every field of it."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    switches: tuple[int, ...]
    links: tuple[Link, ...] = ()
    hosts: tuple[Host, ...] = ()
    capacities: tuple[CapacityRecord, ...] = ()
    default_capacity_bps: int = Topology.default_capacity_bps

    @staticmethod
    def of(topology: Topology) -> TopologyRecord:
        return TopologyRecord(
            switches=tuple(sorted(topology.switches)),
            links=tuple(sorted(topology.links)),
            hosts=topology.hosts,
            capacities=tuple(
                CapacityRecord(port, bps) for port, bps in sorted(topology.capacity_bps.items())
            ),
            default_capacity_bps=topology.default_capacity_bps,
        )

    def topology(self) -> Topology:
        return Topology(
            switches=frozenset(self.switches),
            links=frozenset(self.links),
            hosts=self.hosts,
            capacity_bps={record.port: record.bps for record in self.capacities},
            default_capacity_bps=self.default_capacity_bps,
        )


@dataclass(frozen=True, slots=True)
class PinRecord:
    """An elephant placed on one path: the output port at every switch, ``[dpid, port]``."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    flow: FlowId
    path: tuple[Hop, ...]


@dataclass(frozen=True, slots=True)
class FabricInputsRecord:
    """``FabricInputs``: the fabric as one switch planned with it."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    topology: TopologyRecord
    edge_ports: Annotated[
        tuple[int, ...],
        Field(description="Ports where hosts may be: up, settled, facing no switch"),
    ]
    pinned: tuple[PinRecord, ...] = ()

    @staticmethod
    def of(fabric: FabricInputs) -> FabricInputsRecord:
        return FabricInputsRecord(
            topology=TopologyRecord.of(fabric.topology),
            edge_ports=tuple(sorted(fabric.edge_ports)),
            pinned=tuple(PinRecord(flow, path) for flow, path in sorted(fabric.pinned.items())),
        )

    def fabric_inputs(self) -> FabricInputs:
        return FabricInputs(
            self.topology.topology(),
            frozenset(self.edge_ports),
            {pin.flow: pin.path for pin in self.pinned},
        )


@dataclass(frozen=True, slots=True)
class InputsRecord:
    """``SwitchInputs``: everything about one switch, beyond the policy and jobs, that its
    plan was computed from."""

    __pydantic_config__: ClassVar[ConfigDict] = RECORD_CONFIG

    dpid: int
    ports: tuple[PortState, ...]
    overrides: tuple[OverrideRecord, ...] = ()
    fabric: FabricInputsRecord | None = None
    policy_version: int | None = None
    jobs_version: int = 0

    @staticmethod
    def of(inputs: SwitchInputs) -> InputsRecord:
        return InputsRecord(
            dpid=inputs.dpid,
            ports=inputs.ports,
            overrides=tuple(
                OverrideRecord(flow, name) for flow, name in sorted(inputs.overrides.items())
            ),
            fabric=None if inputs.fabric is None else FabricInputsRecord.of(inputs.fabric),
            policy_version=inputs.policy_version,
            jobs_version=inputs.jobs_version,
        )

    def inputs(self) -> SwitchInputs:
        return SwitchInputs(
            dpid=self.dpid,
            ports=self.ports,
            overrides={record.flow: record.traffic_class for record in self.overrides},
            fabric=None if self.fabric is None else self.fabric.fabric_inputs(),
            policy_version=self.policy_version,
            jobs_version=self.jobs_version,
        )


INPUTS_RECORD: TypeAdapter[InputsRecord] = TypeAdapter(InputsRecord)
