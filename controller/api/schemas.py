"""Response and small request bodies of the API, as pydantic models (they are its OpenAPI).

Records the controller publishes (queue statistics, tracked flows, ports and their
queues) are not written out again here: the API serves the records themselves
(``FlowRecord``, ``QueueStats``, ``PortReport``, ``QueueSpec``), whose field
annotations carry the wire names and descriptions; a model here only wraps them or
adds what the answer computes (``SwitchOut.flow_count``).

The policy document itself is not modelled here: it is validated by
``controller.policy.load.parse_policy`` (so errors carry the paths the CLI
shows) and documented from the policy model (``controller.api.openapi``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from controller.classify.records import FlowRecord
from controller.fabric.snapshot import PinnedView
from controller.qos.records import QueueStats
from controller.store.policies import PolicyVersion, PolicyWrite
from controller.store.switches import PortReport


class FieldErrorOut(BaseModel):
    path: str = Field(description="Where: `rules[1].match.tcp_dst`, `query.timeout`, ...")
    message: str


class ErrorOut(BaseModel):
    detail: str


class QuotaErrorOut(BaseModel):
    """A registration a quota of the active policy refuses (429); nothing was stored."""

    detail: str
    quota: str = Field(description="The quota's path in the policy: `quotas.jobs_per_tenant`...")
    limit: int = Field(description="The quota's value in the active policy")
    wanted: int = Field(description="What the registration would have made the count")


class ValidationErrorOut(BaseModel):
    """Every problem of the request at once, each with its path."""

    detail: str
    errors: list[FieldErrorOut]


class ConflictOut(BaseModel):
    """The request's precondition (If-Match / If-None-Match) names another version."""

    detail: str
    expected_version: int | None = Field(description="What the request expected (null: none)")
    active_version: int | None = Field(description="The active version now (null: none yet)")


class WaitTimeoutOut(BaseModel):
    """The version is stored and active, but not every live switch confirmed it in time."""

    detail: str
    version: int
    pending: list[str] = Field(description="dpids (16 hex digits) that did not confirm")


class PolicyOut(BaseModel):
    version: int
    author: str
    created_at: float = Field(description="Unix time")
    comment: str
    rollback_of: int | None = Field(description="The version this one restored, if any")
    policy: dict[str, Any] = Field(description="The document as it was stored")
    applied: dict[str, int] = Field(
        description="dpid (16 hex digits) → version its flows run, for every live switch"
    )

    @staticmethod
    def of(version: PolicyVersion, applied: dict[str, int]) -> PolicyOut:
        return PolicyOut(
            version=version.version,
            author=version.author,
            created_at=version.created_at,
            comment=version.comment,
            rollback_of=version.rollback_of,
            policy=version.document,
            applied=applied,
        )


class PolicyWriteOut(PolicyOut):
    """The answer to a write: the version active now, and whether this write stored it."""

    unchanged: bool = Field(
        description="True when the document was the active version's already: nothing was"
        " stored or announced, and the version shown is that active one"
    )

    @staticmethod
    def of_write(write: PolicyWrite, applied: dict[str, int]) -> PolicyWriteOut:
        return PolicyWriteOut(
            **dict(PolicyOut.of(write.policy, applied)), unchanged=write.unchanged
        )


class HistoryEntryOut(BaseModel):
    version: int
    author: str
    created_at: float
    comment: str
    rollback_of: int | None
    active: bool


class HistoryOut(BaseModel):
    active_version: int | None
    versions: list[HistoryEntryOut] = Field(description="Newest first")


class RollbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1, le=2**53, description="The version whose document to restore")


class SwitchOut(BaseModel):
    dpid: str = Field(description="16 hex digits")
    controller: str
    datapath_type: str | None
    connected_at: float
    updated_at: float
    applied_version: int | None = Field(description="Confirmed by a barrier; null: none yet")
    flow_count: int
    ports: list[PortReport] = Field(description="The ports and the queues each was given")


class SwitchesOut(BaseModel):
    active_version: int | None
    switches: list[SwitchOut]


class FlowChangesOut(BaseModel):
    added: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: int


class QueueChangesOut(BaseModel):
    added: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: int


class PortPlanOut(BaseModel):
    name: str
    number: int
    link_bps: int | None
    rate_bps: int | None = Field(description="The HTB ceiling the switch reports now")
    planned_rate_bps: int
    note: str = Field(description="Why the planned rate is what it is")
    queues: QueueChangesOut


class GroupChangesOut(BaseModel):
    """Groups (fabric forwarding's multipath) by id: those the plan names and the switch lacks,
    holds otherwise, or holds and the plan does not name (removed whoever made them)."""

    added: list[str]
    changed: list[str]
    removed: list[str]
    unchanged: int


class MeterChangesOut(BaseModel):
    """Meters by id (fabric forwarding's rate limit on packets to the controller)."""

    added: list[str]
    changed: list[str] = Field(description="`<planned> (was <held>)`")
    kept: list[str] = Field(
        description="Held and not planned: the controller leaves them (it deletes no meter)"
    )
    unchanged: int


class PlanInputsOut(BaseModel):
    """What this switch's plan was computed from, besides the policy and the live jobs."""

    known: bool = Field(
        description="False: the switch's controller published no plan inputs (it predates"
        " them); the plan then uses the reported ports alone, all up, without detector"
        " overrides or fabric inputs, and `note` says so"
    )
    policy_version: int | None = Field(
        description="The version the switch planned from when it published these inputs"
    )
    jobs_version: int
    ports_down: list[str] = Field(description="Ports the switch reports down")
    overrides: int = Field(description="Detector overrides planned (elephants moved to a class)")
    overrides_dropped: int = Field(
        description="Overrides the switch holds that this plan drops: its controller starts"
        " detection over when the detection section changes"
    )
    edge_ports: list[int] | None = Field(
        description="Fabric forwarding: the ports where hosts may be (up, settled, facing no"
        " switch); null: the switch published no fabric inputs"
    )
    pinned: int = Field(description="Fabric forwarding: elephants placed on a path")
    note: str | None = Field(description="Why the inputs are incomplete, when they are")


class SwitchPlanOut(BaseModel):
    dpid: str
    applied_version: int | None
    in_sync: bool = Field(description="True when applying would change nothing on this switch")
    unresolved_rules: list[str] = Field(
        description="Rules naming an in_port this switch does not have: they install nothing"
    )
    inputs: PlanInputsOut
    flows: FlowChangesOut
    groups: GroupChangesOut
    meters: MeterChangesOut
    ports: list[PortPlanOut]


class QuotaUseOut(BaseModel):
    """How much of one quota the planned policy would leave, with the jobs live now."""

    quota: str = Field(description="`quotas.entries_per_switch` or `quotas.jobs_per_tenant`")
    tenant: str | None = Field(
        description="For jobs_per_tenant, whose jobs; null: the tokens without a tenant"
        " (for entries_per_switch always null)"
    )
    limit: int
    used: int = Field(description="Rule and live job entries, or the tenant's live jobs")
    headroom: int = Field(
        description="limit - used; negative: live jobs hold more than the planned quota"
        " (they stay until they expire; new ones are refused)"
    )


class PlanOut(BaseModel):
    active_version: int | None
    rule_entries: int = Field(
        description="Classification entries the rules expand to on each switch (at most)"
    )
    rule_entry_limit: int = Field(description="The most a policy may expand to (422 above it)")
    warnings: list[str] = Field(
        default_factory=list,
        description=(
            "What is valid but will not act, each as `field.path: reason`: an override naming"
            " no live port, an elephant rate no flow through some port can reach, placement"
            " without detection"
        ),
    )
    switches: list[SwitchPlanOut]
    quotas: list[QuotaUseOut] = Field(
        default_factory=list,
        description="Headroom of each quota under the planned policy, with the live jobs",
    )


class HealthOut(BaseModel):
    status: str


class ReadyOut(BaseModel):
    status: str
    controllers: list[str]


class EndpointOut(BaseModel):
    ipv4: str = Field(description="CIDR, normalized: `10.0.0.5/32`")
    ports: list[int | str] | None = Field(
        description='Merged ports and ranges (`[22, "8000-8010"]`); null: any port'
    )


class JobOut(BaseModel):
    """A registered job as stored: the request, normalized, with its lifetime."""

    model_config = ConfigDict(populate_by_name=True)

    name: str
    traffic_class: str = Field(alias="class")
    endpoints: list[EndpointOut]
    ttl: float = Field(description="Seconds it lives after each registration")
    weight: int = Field(
        default=1,
        description="Its share of its class's bandwidth relative to the class's other jobs"
        " (1..100; 1 for a job stored before weights)",
    )
    tenant: str | None = Field(
        default=None, description="The tenant of the token that registered it; null: none"
    )
    created_at: float = Field(description="Unix time of the latest registration")
    expires_at: float = Field(description="Unix time; the job is gone after it")


class JobDetailOut(JobOut):
    """One job, with where its elephants run (``GET /v1/jobs/{name}``)."""

    pinned: list[PinnedView] = Field(
        default_factory=list,
        description="The job's elephants the fabric controller placed (placed together, so its"
        " slowest flow crosses the least loaded links it can), each with its path and measured"
        " rate, as of the controller's last fabric snapshot; empty without one, or with"
        " forwarding `normal`",
    )


class JobsOut(BaseModel):
    jobs: list[JobOut] = Field(description="Live jobs, by name")


class FlowsOut(BaseModel):
    flows: list[FlowRecord] = Field(description="Largest first (by bytes)")


class EventOut(BaseModel):
    """One event; the fields besides ``id``, ``kind`` and ``time`` depend on the kind."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="Stream id: pass the last one back as `since`")
    kind: str = Field(description="`policy`, `job`, `reclassified`, ...")
    time: float = Field(description="Unix time")


class EventsOut(BaseModel):
    events: list[EventOut] = Field(description="Oldest first")
    last_id: str | None = Field(
        description="Pass as `since` to read on; past every event read, filtered out or not"
        " (null: none read and no `since` given)"
    )


class SwitchQueuesOut(BaseModel):
    dpid: str
    updated_at: float = Field(description="Unix time of the latest reading")
    queues: list[QueueStats]


class TakeoverOut(BaseModel):
    """An instance took a switch whose owner record named another instance (a dead one)."""

    dpid: str = Field(description="16 hex digits")
    at: float = Field(description="Unix time of the take")
    previous: str = Field(description="The instance whose lease had expired")
    generation: int = Field(description="The generation id it took")


class MasteredOut(BaseModel):
    dpid: str = Field(description="16 hex digits")
    generation: int = Field(description="Its ROLE_REQUEST MASTER generation id")
    since: float | None = Field(description="Unix time this instance took it")
    taken_from: str | None = Field(
        description="The dead instance it took the switch from; null: a free switch (new, or"
        " handed over by a live instance)"
    )


class ControllerOut(BaseModel):
    id: str = Field(description="Its `--instance-id`")
    alive: bool = Field(description="Its lease is current")
    registered_at: float | None = Field(description="Unix time its current lease began")
    lease_age_s: float | None = Field(description="Seconds since its last renewal")
    lease_expires_in_s: float | None = Field(description="Seconds left unless renewed")
    heartbeat_age_s: float | None = Field(description="Seconds since its last heartbeat")
    connected: list[str] = Field(description="Switches connected to it, at its last renewal")
    masters: list[MasteredOut] = Field(
        description="Switches whose owner record names it (a dead instance's wait for a taker)"
    )
    last_takeover: TakeoverOut | None = Field(description="Its newest takeover of a switch")


class ControllersOut(BaseModel):
    controllers: list[ControllerOut] = Field(description="By id, dead ones included")
    unmastered: list[str] = Field(
        description="Switches connected to a live instance that no live instance masters"
    )
