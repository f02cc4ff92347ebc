"""What a scenario file declares: topology, workloads, policy, bottleneck, duration and modes.

A scenario is one YAML file in ``mininet/scenarios/``.  The models check each
field; ``scenario_errors`` checks what spans fields (a workload naming a host
the topology lacks, a bottleneck port that does not exist or that the policy
gives no rate).  ``load_scenario`` reports every problem at once, with field
paths, the way policy files do.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from controller.policy.detection import DurationField, SizeField
from controller.policy.errors import FieldError, PolicyError, format_path
from controller.policy.load import load_policy_document, read_document_file
from controller.policy.model import Policy
from flowlane_bench.suite import topology
from flowlane_bench.suite.topology import TopologyPlan

_NAME = r"^[a-z][a-z0-9-]{0,39}$"
_CLASS = r"^[A-Za-z][A-Za-z0-9_.-]{0,62}$"
_JOB_DESCRIPTION = (
    "in flowlane mode, register the workload's hosts and ports as a job of this class"
    " through the REST API before it starts, as a scheduler would"
)
_WEIGHT_DESCRIPTION = "the job's weight when registered (its share in a per-job class)"
SINK_NAME = re.compile(r"sink[0-9]+")
"""Hosts the ``control`` reference adds to the network, one per switch that sends training."""
HostName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9]{0,9}$")]
"""Short: Mininet names a host's interface ``<host>-eth0`` and Linux allows 15 characters."""


class Mode(StrEnum):
    """How the fabric is run; every mode runs in the same invocation, on the same network."""

    FIFO = "fifo"
    """One class, one queue per port: a fabric without flowlane."""
    STATIC = "static"
    """The scenario's policy without detection: operator rules only."""
    FLOWLANE = "flowlane"
    """The whole policy: rules, detection, job registrations and its forwarding."""
    STP = "stp"
    """The whole policy, forwarded by OVS's ``NORMAL`` over a spanning tree (RSTP)."""
    ECMP = "ecmp"
    """The whole policy, forwarded by the controller's select groups, nothing placed."""
    PERFLOW = "perflow"
    """Flowlane without job shares: every class ``share: per-flow`` and no job registered, so
    a job's flows share their class per flow and a fabric places them flow by flow."""


FABRIC_MODES = (Mode.STP, Mode.ECMP)
"""Modes that compare forwarding rather than classification: they need a fabric with loops."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Topology(_Strict):
    mtu: int = Field(
        default=topology.ETHERNET_MTU,
        ge=topology.ETHERNET_MTU,
        le=topology.JUMBO_MTU,
        description="every link's MTU, hosts and switch ports alike; 9000 for jumbo frames,"
        " as training fabrics run (fewer packets for the same bytes)",
    )

    def _with_mtu(self, plan: TopologyPlan) -> TopologyPlan:
        return plan if self.mtu == plan.mtu else dataclasses.replace(plan, mtu=self.mtu)


class SingleTopology(_Topology):
    kind: Literal["single"]
    hosts: list[HostName] = Field(min_length=2, max_length=64)

    def plan(self) -> TopologyPlan:
        return self._with_mtu(topology.single(self.hosts))


class DumbbellTopology(_Topology):
    kind: Literal["dumbbell"]
    left: list[HostName] = Field(min_length=1, max_length=32)
    right: list[HostName] = Field(min_length=1, max_length=32)

    def plan(self) -> TopologyPlan:
        return self._with_mtu(topology.dumbbell(self.left, self.right))


class LeafSpineTopology(_Topology):
    kind: Literal["leaf-spine"]
    leaves: int = Field(ge=2, le=16)
    spines: int = Field(ge=1, le=8)
    hosts_per_leaf: int = Field(ge=1, le=12)

    def plan(self) -> TopologyPlan:
        return self._with_mtu(topology.leaf_spine(self.leaves, self.spines, self.hosts_per_leaf))


TopologySpec = Annotated[
    SingleTopology | DumbbellTopology | LeafSpineTopology, Field(discriminator="kind")
]


class Burst(_Strict):
    """On/off arrivals: requests come only while ``active``, at the workload's rate.

    (Not ``on``/``off``: YAML reads those words as booleans.)
    """

    active: DurationField
    quiet: DurationField


class InferenceWorkload(_Strict):
    """Open-loop request/response load; each client sends ``rate`` requests/s to one server.

    Clients are spread over ``servers`` round-robin.  Several clients to one
    server with aligned bursts is incast.
    """

    kind: Literal["inference"]
    name: Annotated[str, Field(pattern=_NAME)]
    clients: list[HostName] = Field(min_length=1, max_length=64)
    servers: list[HostName] = Field(min_length=1, max_length=16)
    port: int = Field(default=8000, ge=1, le=65535)
    rate: float = Field(gt=0, le=20_000, description="requests per second per client")
    request_size: SizeField = 256
    response_size: SizeField = 1024
    connections: int = Field(default=4, ge=1, le=64)
    arrivals: Literal["poisson", "uniform"] = "poisson"
    burst: Burst | None = None
    timeout: DurationField = 5.0


class BulkFlow(_Strict):
    src: HostName
    dst: HostName


class BulkWorkload(_Strict):
    """iperf3 streams: TCP, or UDP at a fixed rate (to 4791, the RoCEv2 port, by default)."""

    kind: Literal["bulk"]
    name: Annotated[str, Field(pattern=_NAME)]
    protocol: Literal["tcp", "udp"] = "tcp"
    flows: list[BulkFlow] = Field(min_length=1, max_length=32)
    port: int | None = Field(
        default=None, ge=1, le=65000, description="first server port; 5201 (tcp) or 4791 (udp)"
    )
    udp_rate: str | None = Field(default=None, description="iperf3 -b for udp, e.g. 20M")
    job: Annotated[str, Field(pattern=_CLASS)] | None = Field(
        default=None, description=_JOB_DESCRIPTION
    )
    weight: int = Field(default=1, ge=1, le=100, description=_WEIGHT_DESCRIPTION)

    @model_validator(mode="after")
    def _check_udp(self) -> BulkWorkload:
        if self.protocol == "udp" and not self.udp_rate:
            raise ValueError("udp flows need 'udp_rate' (UDP has no congestion control)")
        if self.protocol == "tcp" and self.udp_rate:
            raise ValueError("'udp_rate' applies to udp flows only")
        return self

    @property
    def first_port(self) -> int:
        return self.port or (5201 if self.protocol == "tcp" else 4791)


class AllReduceWorkload(_Strict):
    """Ring all-reduce of ``size`` bytes per iteration over ``workers`` (in ring order)."""

    kind: Literal["allreduce"]
    name: Annotated[str, Field(pattern=_NAME)]
    workers: list[HostName] = Field(min_length=2, max_length=32)
    size: SizeField
    compute: DurationField | None = None
    start: DurationField | None = Field(
        default=None,
        description="seconds after the phase's training starts that the ring starts (jobs"
        " start at different times); before the ramp ends, to be measured",
    )
    port: int = Field(default=29500, ge=1, le=65535)
    job: Annotated[str, Field(pattern=_CLASS)] | None = Field(
        default=None, description=_JOB_DESCRIPTION
    )
    weight: int = Field(default=1, ge=1, le=100, description=_WEIGHT_DESCRIPTION)


class ProbeWorkload(_Strict):
    """One stream of sequence-numbered UDP datagrams at ``rate``: loss in milliseconds.

    ``flows`` are candidates, tried in order: the runner traces each one's path
    (a short burst, and the switch ports it raised) once the fabric is ready,
    and sends the stream between the first pair whose path crosses the first
    failing link.  Hashing picks a spine per host pair, so one fixed pair
    would cross the failing link only half of the time.
    """

    kind: Literal["probe"]
    name: Annotated[str, Field(pattern=_NAME)]
    flows: list[BulkFlow] = Field(min_length=1, max_length=16)
    rate: int = Field(default=1000, ge=10, le=10_000, description="datagrams per second")
    size: SizeField = Field(default=64, description="UDP payload bytes")
    port: int = Field(default=7000, ge=1, le=65535)

    @model_validator(mode="after")
    def _check_size(self) -> ProbeWorkload:
        if not 16 <= self.size <= 1400:
            raise ValueError("'size' must be 16-1400 bytes: a sequence number and a timestamp")
        return self


Workload = Annotated[
    InferenceWorkload | BulkWorkload | AllReduceWorkload | ProbeWorkload,
    Field(discriminator="kind"),
]
TRAINING_KINDS = ("bulk", "allreduce")


class LinkState(StrEnum):
    DOWN = "down"
    UP = "up"


class LinkEvent(_Strict):
    """At ``at`` seconds after the phase's training started, ``link`` goes ``state``.

    Both ends of a Mininet link change together (``configLinkStatus``): the
    switch on either side sees its port go down, as with a pulled cable.
    """

    at: DurationField
    link: tuple[Annotated[str, Field(min_length=1)], Annotated[str, Field(min_length=1)]]
    state: LinkState


class Reference(StrEnum):
    """Phases that measure one load without the other, run before the modes.

    ``control`` runs the training load off the bottleneck, next to inference:
    the CPUs carry the same work, no queue is shared (``flowlane_bench.suite.control``).
    """

    IDLE = "idle"
    ALONE = "alone"
    CONTROL = "control"


class Scenario(_Strict):
    """One scenario file."""

    name: Annotated[str, Field(pattern=_NAME)]
    description: str = Field(min_length=1, max_length=2000)
    topology: TopologySpec
    policy: Path = Field(description="the policy file, relative to the repository root")
    bottleneck: str = Field(
        min_length=1, description="the switch port training and inference share"
    )
    duration: DurationField = 20.0
    ramp: DurationField = Field(
        default=2.0, description="training runs this long before inference is measured"
    )
    modes: list[Mode] = Field(
        default_factory=lambda: [Mode.FIFO, Mode.STATIC, Mode.FLOWLANE], min_length=1
    )
    workloads: list[Workload] = Field(min_length=2, max_length=16)
    events: list[LinkEvent] = Field(
        default_factory=list,
        max_length=32,
        description="link failures and repairs during every mode's phase, in time order",
    )
    references: list[Reference] = Field(
        default_factory=lambda: [Reference.IDLE, Reference.ALONE, Reference.CONTROL],
        min_length=1,
        description="reference phases run first: idle (inference alone), alone (training"
        " alone), control (both, training kept off the bottleneck)",
    )

    def plan(self) -> TopologyPlan:
        return self.topology.plan()

    @property
    def inference(self) -> list[InferenceWorkload]:
        return [w for w in self.workloads if isinstance(w, InferenceWorkload)]

    @property
    def training(self) -> list[BulkWorkload | AllReduceWorkload]:
        return [w for w in self.workloads if isinstance(w, BulkWorkload | AllReduceWorkload)]

    @property
    def jobs(self) -> dict[str, int]:
        """The training workloads registered as jobs in flowlane mode: name → weight."""
        return {w.name: w.weight for w in self.training if w.job is not None}

    @property
    def probes(self) -> list[ProbeWorkload]:
        return [w for w in self.workloads if isinstance(w, ProbeWorkload)]


class ScenarioError(ValueError):
    """A scenario file was rejected; ``errors`` lists every problem found."""

    def __init__(self, errors: list[FieldError], source: str) -> None:
        self.errors = tuple(errors)
        lines = "\n".join(f"  {error}" for error in self.errors)
        super().__init__(f"{source}: {len(self.errors)} error(s)\n{lines}")


def _workload_hosts(
    workload: InferenceWorkload | BulkWorkload | AllReduceWorkload | ProbeWorkload,
) -> list[tuple[str, str]]:
    """(field, host) for every host a workload names."""
    if isinstance(workload, InferenceWorkload):
        return [(f"clients[{i}]", h) for i, h in enumerate(workload.clients)] + [
            (f"servers[{i}]", h) for i, h in enumerate(workload.servers)
        ]
    if isinstance(workload, BulkWorkload | ProbeWorkload):
        return [
            (f"flows[{i}].{end}", getattr(flow, end))
            for i, flow in enumerate(workload.flows)
            for end in ("src", "dst")
        ]
    return [(f"workers[{i}]", h) for i, h in enumerate(workload.workers)]


def scenario_errors(scenario: Scenario, policy: Policy) -> list[FieldError]:
    """What no single field can see: hosts, ports and names against each other and the policy."""
    errors: list[FieldError] = []
    try:
        plan = scenario.plan()
    except ValueError as exc:
        return [FieldError("topology", str(exc))]
    hosts = set(plan.host_names)
    names: set[str] = set()
    for index, workload in enumerate(scenario.workloads):
        where = f"workloads[{index}]"
        if workload.name in names:
            errors.append(FieldError(f"{where}.name", f"'{workload.name}' is used twice"))
        names.add(workload.name)
        for field_name, host in _workload_hosts(workload):
            if host not in hosts:
                errors.append(
                    FieldError(
                        f"{where}.{field_name}",
                        f"no host '{host}' in the topology (it has {', '.join(plan.host_names)})",
                    )
                )
        if isinstance(workload, BulkWorkload | ProbeWorkload):
            for i, flow in enumerate(workload.flows):
                if flow.src == flow.dst:
                    errors.append(FieldError(f"{where}.flows[{i}]", "src and dst are one host"))
        job = getattr(workload, "job", None)
        if job is not None and job not in policy.classes:
            errors.append(
                FieldError(
                    f"{where}.job",
                    f"no class '{job}' in the policy (it has {', '.join(policy.class_names)})",
                )
            )
        if isinstance(workload, AllReduceWorkload) and len(set(workload.workers)) != len(
            workload.workers
        ):
            errors.append(FieldError(f"{where}.workers", "a worker appears twice in the ring"))
    if not scenario.inference:
        errors.append(FieldError("workloads", "needs an inference workload (the latency probe)"))
    if not scenario.training:
        errors.append(FieldError("workloads", "needs a training workload (bulk or allreduce)"))
    if len(set(scenario.modes)) != len(scenario.modes):
        errors.append(FieldError("modes", "a mode is listed twice"))
    for index, mode in enumerate(scenario.modes):
        if mode in FABRIC_MODES and not plan.loops:
            errors.append(
                FieldError(
                    f"modes[{index}]",
                    f"'{mode}' compares forwarding over redundant paths: it needs a leaf-spine"
                    " with more than one spine and leaf",
                )
            )
    errors += _reference_errors(scenario)
    errors += event_errors(scenario.events, plan, scenario.ramp + scenario.duration)
    if len(scenario.probes) > 1:
        errors.append(FieldError("workloads", "at most one probe workload (one stream)"))
    ports = plan.switch_ports()
    if scenario.bottleneck not in ports:
        errors.append(FieldError("bottleneck", f"no port '{scenario.bottleneck}' in the topology"))
    elif scenario.bottleneck not in policy.ports.overrides:
        errors.append(
            FieldError(
                "bottleneck",
                f"the policy sets no rate for '{scenario.bottleneck}' (ports.overrides):"
                " the bottleneck's capacity comes from the policy",
            )
        )
    for port in policy.ports.overrides:
        if port not in ports:
            errors.append(
                FieldError("policy", f"ports.overrides names '{port}', not a port of this topology")
            )
    return errors


def _reference_errors(scenario: Scenario) -> list[FieldError]:
    errors = []
    if len(set(scenario.references)) != len(scenario.references):
        errors.append(FieldError("references", "a reference is listed twice"))
    if Reference.IDLE not in scenario.references:
        errors.append(FieldError("references", "needs 'idle': inference p99 is read against it"))
    if Reference.ALONE not in scenario.references and any(
        isinstance(w, AllReduceWorkload) for w in scenario.workloads
    ):
        errors.append(
            FieldError("references", "needs 'alone': all-reduce times are read against it")
        )
    if Reference.CONTROL in scenario.references:
        if Reference.ALONE not in scenario.references:
            errors.append(
                FieldError(
                    "references",
                    "'control' needs 'alone': control sends each training flow at the rate"
                    " it reached alone",
                )
            )
        sinks = [h for h in scenario.plan().host_names if SINK_NAME.fullmatch(h)]
        if sinks:
            errors.append(
                FieldError(
                    "topology",
                    f"host name {sinks[0]} is reserved: 'control' adds sink hosts sink1, sink2, …",
                )
            )
    return errors


def event_errors(events: list[LinkEvent], plan: TopologyPlan, phase_s: float) -> list[FieldError]:
    """Events name switch-to-switch links, come in time order inside the phase, and alternate.

    A link goes down before it comes up again, and a repair without a failure
    (or two failures in a row) is refused: it would measure nothing.
    """
    errors: list[FieldError] = []
    switches = {switch.name for switch in plan.switches}
    links = {frozenset((link.a, link.b)) for link in plan.links}
    down: set[frozenset[str]] = set()
    previous = 0.0
    for index, event in enumerate(events):
        where = f"events[{index}]"
        if event.at < previous:
            errors.append(FieldError(f"{where}.at", f"{event.at:g}s is before the event above"))
        if event.at >= phase_s:
            errors.append(
                FieldError(
                    f"{where}.at",
                    f"{event.at:g}s is past the phase (ramp + duration = {phase_s:g}s)",
                )
            )
        previous = max(previous, event.at)
        a, b = event.link
        named = [end for end in (a, b) if end not in switches]
        if named:
            errors.append(
                FieldError(
                    f"{where}.link",
                    f"no switch '{named[0]}' in the topology (links join switches:"
                    f" {', '.join(sorted(switches))})",
                )
            )
            continue
        key = frozenset((a, b))
        if key not in links:
            errors.append(FieldError(f"{where}.link", f"no link between {a} and {b}"))
            continue
        if event.state is LinkState.DOWN:
            if key in down:
                errors.append(FieldError(f"{where}.state", f"{a}-{b} is already down"))
            down.add(key)
        elif key not in down:
            errors.append(FieldError(f"{where}.state", f"{a}-{b} is up: it never went down"))
        else:
            down.discard(key)
    return errors


@dataclass(frozen=True)
class LoadedScenario:
    """A valid scenario with its policy, and the policy's document (modes derive from it)."""

    scenario: Scenario
    policy: Policy
    policy_document: dict[str, Any]
    source: Path | None = None


def parse_scenario(document: object, source: str, repo: Path) -> LoadedScenario:
    """Validate a decoded scenario document and the policy it names; raise ``ScenarioError``."""
    if not isinstance(document, dict):
        kind = "empty" if document is None else type(document).__name__
        raise ScenarioError(
            [FieldError("(document)", f"a scenario is a mapping, got {kind}")], source
        )
    try:
        scenario = Scenario.model_validate(document)
    except ValidationError as exc:
        raise ScenarioError(
            [
                FieldError(format_path(e["loc"]), e["msg"].removeprefix("Value error, "))
                for e in exc.errors()
            ],
            source,
        ) from None
    try:
        policy, policy_document = load_policy_document(repo / scenario.policy)
    except PolicyError as exc:
        raise ScenarioError(
            [FieldError(f"policy ({error.path})", error.message) for error in exc.errors], source
        ) from None
    problems = scenario_errors(scenario, policy)
    if problems:
        raise ScenarioError(problems, source)
    return LoadedScenario(scenario, policy, policy_document)


def load_scenario(path: Path, repo: Path) -> LoadedScenario:
    try:
        document = read_document_file(path)
    except PolicyError as exc:
        raise ScenarioError(list(exc.errors), str(path)) from None
    loaded = parse_scenario(document, str(path), repo)
    if loaded.scenario.name != path.stem:
        raise ScenarioError(
            [
                FieldError(
                    "name", f"'{loaded.scenario.name}' differs from the file name '{path.stem}'"
                )
            ],
            str(path),
        )
    return LoadedScenario(loaded.scenario, loaded.policy, loaded.policy_document, path)


def scenario_files(directory: Path) -> dict[str, Path]:
    """Scenario name to file, sorted by name."""
    return {path.stem: path for path in sorted(directory.glob("*.yaml"))}
