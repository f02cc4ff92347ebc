"""Keep the controller and Redis in step: policy versions in; switch reports and heartbeats out.

Redis is where operators change policy, but it must never be what keeps the
fabric running: when Redis goes away the controller keeps enforcing the last
policy it had, logs once, retries with back-off, and on return catches up
with whatever version became active meanwhile and re-sends the switch
reports it could not deliver.

A Redis that comes back without its data (or with older data) is noticed
through the store's epoch and the version numbers (``controller/store/epoch.py``):
the controller keeps enforcing what it has, logs, records an event, counts
it in ``flowlane_store_regressions_total``, flags itself for ``/readyz``, and
raises the store's version sequence so that the next write is numbered
above the version it enforces; a number that went backwards is never adopted.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import redis

from controller.fabric.snapshot import FabricEvent, FabricSnapshot
from controller.link.outbox import Outbox
from controller.mastership.changes import EVENT_KIND, Change
from controller.metrics import ControllerMetrics
from controller.openflow.observer import ObservedFlow, Reclassification, SyncReport
from controller.pipeline.flows import FlowEntry, FlowKey
from controller.policy.errors import PolicyError
from controller.policy.jobs import JobSpec, stored_jobs
from controller.policy.load import parse_policy
from controller.policy.model import Policy
from controller.qos.telemetry import QueueStats
from controller.store.client import connect
from controller.store.epoch import (
    Enforced,
    EpochStore,
    Regression,
    RegressionFlag,
    StoreView,
    judge,
)
from controller.store.errors import StoreUnavailableError, VersionConflictError
from controller.store.events import EventStore
from controller.store.fabric import FabricStore
from controller.store.flows import FlowRecord, FlowStore
from controller.store.groups import GroupRecord
from controller.store.inputs import InputsRecord
from controller.store.jobs import JobStore
from controller.store.liveness import HEARTBEAT_INTERVAL_S
from controller.store.policies import PolicyStore, PolicyVersion
from controller.store.queues import QueueStore
from controller.store.switches import PortReport, ReportedFlow, SwitchReport, SwitchStore

LOG = logging.getLogger("flowlane.redis")

ApplyPolicy = Callable[[Policy, int], None]
ApplyJobs = Callable[[tuple[JobSpec, ...]], None]

APPLIED_KEY = ("applied",)
"""The store writer's key for the switches' confirmed versions: one urgent write for all."""

CHECK_INTERVAL_S = 2.0
"""How often the follower re-reads the active version (and the store's epoch) besides the
announcements: it reads the whole active record, so not as often as the heartbeat."""


def switch_report(report: SyncReport, controller: str) -> SwitchReport:
    """The stored record of a switch's report: what it holds, and what its plan came from."""
    queues = {plan.port_name: plan for plan in report.queues}
    return SwitchReport(
        dpid=report.dpid,
        controller=controller,
        connected_at=report.connected_at,
        applied_version=report.policy_version,
        datapath_type=report.datapath_type,
        ports=tuple(
            PortReport(
                name=port.name,
                number=port.number,
                link_bps=port.link_bps,
                rate_bps=queues[port.name].rate_bps if port.name in queues else None,
                queues=queues[port.name].queues if port.name in queues else (),
            )
            for port in report.ports
        ),
        flows=_reported_flows(report.flows),
        groups=tuple(GroupRecord.of(group) for group in report.groups),
        meters=report.meters,
        inputs=None if report.inputs is None else InputsRecord.of(report.inputs),
    )


_REPORTED: dict[int, tuple[tuple[FlowEntry, ...], tuple[ReportedFlow, ...]]] = {}


def _reported_flows(flows: tuple[FlowEntry, ...]) -> tuple[ReportedFlow, ...]:
    """``_reported_flow`` of each entry, kept for the last few plans by identity: switches
    alike confirm one plan (one tuple of entries), and a hundred of them report after every
    change; the same result tuple lets ``SwitchReport.to_json`` reuse its text too."""
    known = _REPORTED.get(id(flows))
    if known is not None and known[0] is flows:
        return known[1]
    reported = tuple(_reported_flow(flow.key, flow.cookie) for flow in flows)
    if len(_REPORTED) >= 16:
        _REPORTED.clear()
    _REPORTED[id(flows)] = (flows, reported)
    return reported


@functools.lru_cache(maxsize=65_536)
def _reported_flow(key: FlowKey, cookie: int) -> ReportedFlow:
    """A planned entry as a report lists it, kept by key and cookie (both hashed once per
    entry): ten switches report every entry after every change, and the same tuple
    object each time lets the report's encoder find its text without comparing fields."""
    return (
        key.table_id,
        key.priority,
        tuple((f.name, f.value, f.mask) for f in key.match),
        cookie,
    )


class RedisLink:
    """Runs on its own thread (``run``); the app calls ``switch_synced``/``switch_gone``.

    Heartbeats go out from a second thread that ``run`` starts, every
    ``heartbeat_s``, so nothing the follower does (parsing a large policy,
    handing it to the app, backing off) can delay one.  The follower checks
    the store every ``check_s`` and on every announcement.
    """

    def __init__(
        self,
        url: str,
        controller_id: str,
        *,
        prefix: str = "flowlane",
        heartbeat_s: float = HEARTBEAT_INTERVAL_S,
        check_s: float = CHECK_INTERVAL_S,
        max_backoff_s: float = 5.0,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        if heartbeat_s <= 0 or check_s <= 0:
            raise ValueError(f"heartbeat_s and check_s must be positive: {heartbeat_s}, {check_s}")
        self._client = connect(url)
        self.policies = PolicyStore(self._client, prefix)
        self.switches = SwitchStore(self._client, prefix)
        self.events = EventStore(self._client, prefix)
        self.flows = FlowStore(self._client, prefix)
        self.queues = QueueStore(self._client, prefix)
        self.jobs = JobStore(self._client, prefix)
        self.fabric = FabricStore(self._client, prefix)
        self.epochs = EpochStore(self._client, prefix)
        self._metrics = metrics
        self._jobs: tuple[JobSpec, ...] | None = None
        self._apply_jobs: ApplyJobs | None = None
        self.controller_id = controller_id
        self._heartbeat_s = heartbeat_s
        self._check_s = check_s
        self._max_backoff_s = max_backoff_s
        self._lock = threading.Lock()
        self._latest: dict[int, SyncReport] = {}
        self._applied_pending: dict[int, int | None] = {}
        """Confirmed versions not yet written (``_write_applied``), by switch."""
        self._outbox = Outbox()
        """The last report of every connected switch: re-sent whenever Redis comes back,
        since a Redis that restarted may have lost them and the app only reports changes."""
        self._enforced: Enforced | None = None
        """The stored version in force and its store's epoch; None: the --policy file."""
        self._epoch_seen: str | None = None
        """The store's epoch at the last check: a change means Redis lost its data."""
        self._regression: RegressionFlag | None = None
        """Set while the store holds less than what is enforced (published for /readyz)."""
        self._refused: tuple[int, float] | None = None
        """(version, created_at) of the newest version that did not validate: logged once."""
        self._apply: ApplyPolicy | None = None
        self._stopping = threading.Event()
        self._stop_channel = f"{self.policies.channel}:stop:{secrets.token_hex(8)}"
        """The follower's own channel: ``stop`` publishes on it, so the follower leaves its
        wait for a message at once, not up to half a second later (every controller stop)."""
        self._healthy = True
        self._beater: threading.Thread | None = None
        self._beat_hooks: list[Callable[[], object]] = []
        self._woken = threading.Event()

    @property
    def enforced_version(self) -> int | None:
        """The stored version this controller enforces (None: its --policy file)."""
        enforced = self._enforced
        return enforced.version if enforced is not None else None

    @property
    def regression(self) -> RegressionFlag | None:
        """What this controller found wrong with the store, while it is so."""
        return self._regression

    # ---- start-up ------------------------------------------------------------

    def bootstrap(
        self, fallback: Policy, fallback_document: dict[str, Any]
    ) -> tuple[Policy, int | None]:
        """The policy to start with: Redis's active version, or the file stored as version 1.

        With Redis unreachable the file's policy is used and ``run`` catches
        up once Redis answers.
        """
        try:
            epoch = self.epochs.ensure()
            self._epoch_seen = epoch.id
            active = self.policies.active()
            if active is None:
                try:
                    stored = self.policies.put(
                        fallback_document,
                        author=f"controller {self.controller_id}",
                        comment="initial policy from the controller's --policy file",
                        expected_version=None,
                    )
                    LOG.info(
                        "Redis had no policy: stored the --policy file as version %d",
                        stored.version,
                    )
                    active = stored
                except VersionConflictError:
                    active = self.policies.active()  # another controller stored one first
            if active is not None:
                policy = parse_policy(active.document, f"policy version {active.version}")
                self._enforced = Enforced(active.version, active.created_at, epoch.id)
                return policy, active.version
        except StoreUnavailableError as exc:
            LOG.warning("%s; starting with the --policy file, will catch up", exc)
            self._healthy = False
        except PolicyError as exc:
            LOG.error("active policy in Redis does not validate, using the --policy file: %s", exc)
        return fallback, None

    # ---- the follower thread ---------------------------------------------------

    def run(self, apply: ApplyPolicy, apply_jobs: ApplyJobs | None = None) -> None:
        """Follow policy versions (and registered jobs) until ``stop``; never raises."""
        self._apply = apply
        self._apply_jobs = apply_jobs
        if self._beater is None and not self._stopping.is_set():
            self._beater = threading.Thread(
                target=self._beat, name="flowlane-heartbeat", daemon=True
            )
            self._beater.start()
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                self._follow()
            except (StoreUnavailableError, redis.ConnectionError, redis.TimeoutError) as exc:
                if self._healthy:
                    LOG.error(
                        "Redis unavailable (%s); enforcing policy version %s meanwhile",
                        exc,
                        self.enforced_version or "from the --policy file",
                    )
                self._healthy = False
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self._max_backoff_s)
            except Exception:
                LOG.exception("Redis follower failed; restarting it")
                self._stopping.wait(1.0)
            else:
                backoff = 0.1

    def on_beat(self, hook: Callable[[], object]) -> None:
        """Run ``hook`` on the heartbeat thread after every beat (mastership renews its lease
        there: a thread that nothing else the controller does can delay)."""
        self._beat_hooks.append(hook)

    def wake_beat(self) -> None:
        """Beat now rather than at the next interval (any thread)."""
        self._woken.set()

    def stop(self) -> None:
        """Stop both threads and say goodbye: no flag and no heartbeat left behind.

        With Redis known to be down the goodbye is skipped rather than waited
        for; the heartbeat then simply ages out.
        """
        self._stopping.set()
        self._woken.set()
        if self._healthy:
            with contextlib.suppress(redis.RedisError, OSError):
                self._client.publish(self._stop_channel, "stop")
        if self._beater is not None:
            self._beater.join(timeout=1.0)
        self._outbox.stop(timeout_s=0.5)
        if not self._healthy:
            return
        with contextlib.suppress(StoreUnavailableError):
            self.epochs.clear(self.controller_id)
            self.switches.remove_controller(self.controller_id)

    def _beat(self) -> None:
        while not self._stopping.is_set():
            up = False
            try:
                pruned = self.switches.heartbeat(self.controller_id)
                up = True
                if pruned:
                    LOG.info("forgot silent controller(s) and their switches: %s", pruned)
            except (StoreUnavailableError, redis.RedisError):
                pass  # the follower logs the outage, and its end
            except Exception:
                LOG.exception("heartbeat failed")
            if self._metrics is not None:
                self._metrics.store_up.set(1 if up else 0)
            for hook in self._beat_hooks:
                try:
                    hook()
                except Exception:
                    LOG.exception("heartbeat hook failed")
            self._woken.wait(self._heartbeat_s)
            self._woken.clear()

    def _follow(self) -> None:
        # Through a typed name: redis-py annotates ``pubsub`` from 8.2 on, not before.
        make_pubsub: Callable[..., redis.client.PubSub] = self._client.pubsub
        pubsub = make_pubsub(ignore_subscribe_messages=True)
        try:
            pubsub.subscribe(self.policies.channel, self.jobs.channel, self._stop_channel)
            if not self._healthy:
                LOG.info("Redis is back")
                self._healthy = True
                self._resend_reports()
            next_check = 0.0
            while not self._stopping.is_set():
                now = time.monotonic()
                if now >= next_check:
                    # pub/sub is fire-and-forget: a message lost to a reconnect must not
                    # leave a switch on an old version, nor a store that lost data unseen.
                    self._check()
                    self._refresh_jobs()  # also how expired jobs leave the switches
                    next_check = now + self._check_s
                message = pubsub.get_message(timeout=min(0.5, self._check_s))
                if message is not None and message.get("type") == "message":
                    if message.get("channel") == self._stop_channel:
                        continue  # the loop's condition ends it
                    if message.get("channel") == self.jobs.channel:
                        self._refresh_jobs()
                    else:
                        self._on_announcement(str(message["data"]))
        finally:
            pubsub.close()

    def _resend_reports(self) -> None:
        # Queued under the lock, as ``_send`` queues: a report an actor hands over meanwhile
        # is queued after this copy, never replaced by it (the outbox keeps the last put).
        with self._lock:
            for dpid, report in self._latest.items():
                self._put_report(dpid, report)

    def _on_announcement(self, data: str) -> None:
        try:
            int(json.loads(data)["version"])
        except (ValueError, KeyError, TypeError):
            LOG.warning("ignoring malformed policy announcement %r", data)
            return
        # The announced number alone proves nothing (a store that lost data announces
        # "version 1" again): the check reads the store and judges it.
        self._check()

    def _refresh_jobs(self) -> None:
        current, invalid = stored_jobs((r.name, r.document) for r in self.jobs.all())
        for name, exc in invalid:
            LOG.error("job %s in Redis does not validate; ignored: %s", name, exc)
        if current != self._jobs:
            self._jobs = current
            if self._apply_jobs is not None:
                self._apply_jobs(current)

    # ---- the store against what is enforced ------------------------------------------

    def _check(self) -> None:
        """Read the store's epoch and active version, and act on ``judge``'s verdict."""
        epoch = self.epochs.ensure()
        if self._epoch_seen is not None and epoch.id != self._epoch_seen:
            LOG.warning(
                "the store's epoch changed (%s to %s): Redis lost its data; re-sending the"
                " switch reports",
                self._epoch_seen,
                epoch.id,
            )
            self._resend_reports()
        self._epoch_seen = epoch.id
        active = self.policies.active()
        view = StoreView(
            epoch.id,
            active.version if active is not None else None,
            active.created_at if active is not None else None,
        )
        verdict = judge(self._enforced, view)
        if isinstance(verdict, Regression):
            self._regressed(verdict)
            return
        self._recovered(view)
        if verdict == "adopt":
            assert active is not None
            self._adopt(active, epoch.id)

    def _adopt(self, record: PolicyVersion, epoch: str) -> None:
        if (record.version, record.created_at) == self._refused:
            return
        try:
            policy = parse_policy(record.document, f"policy version {record.version}")
        except PolicyError as exc:
            self._refused = (record.version, record.created_at)
            LOG.error(
                "policy version %d does not validate; keeping the current one: %s",
                record.version,
                exc,
            )
            return
        self._enforced = Enforced(record.version, record.created_at, epoch)
        if self._apply is not None:
            self._apply(policy, record.version)

    def _regressed(self, regression: Regression) -> None:
        """Keep enforcing; say so once; make the operator's next write one we can adopt."""
        previous = self._regression
        since = previous.since if previous is not None else time.time()
        flag = RegressionFlag(self.controller_id, regression, since)
        # Raise the sequence before anyone can see the flag: an operator who reads it and
        # writes at once must get a version above the enforced one. Every check, not once:
        # a store that lost data once may lose it again.
        self.policies.reserve_through(regression.enforced)
        self._regression = flag
        if previous is None or previous.regression.kind != regression.kind:
            # A new finding (a half-restored store may first look "gone", then "older").
            LOG.warning("%s", flag.message())
            if self._metrics is not None:
                self._metrics.store_regressions.labels(regression.kind).inc()
                self._metrics.store_regressed.set(1)
            if previous is None:
                self._record("store-regression", flag)
        elif previous.regression != regression:
            LOG.warning("%s", flag.message())
        self.epochs.flag(flag)

    def _recovered(self, view: StoreView) -> None:
        flag = self._regression
        if flag is None:
            return
        self.epochs.clear(self.controller_id)
        self._regression = None
        LOG.info(
            "the store is consistent again: its active version is %s (this controller"
            " enforced %d when it found it behind)",
            view.active,
            flag.regression.enforced,
        )
        if self._metrics is not None:
            self._metrics.store_regressed.set(0)
        self._record("store-recovered", flag)

    def _record(self, kind: str, flag: RegressionFlag) -> None:
        try:
            self.events.append(
                kind,
                {
                    "controller": flag.controller,
                    "reason": flag.regression.kind,
                    "enforced": flag.regression.enforced,
                    "active": flag.regression.active,
                    "detail": flag.message(),
                },
            )
        except StoreUnavailableError as exc:
            LOG.warning("%s event not recorded: %s", kind, exc)

    # ---- reports from the switch actors (queued, never waiting on Redis) ---------------

    def drain(self, timeout_s: float = 5.0) -> bool:
        """Wait until every report handed over so far is in Redis; False on timeout."""
        return self._outbox.flush(timeout_s)

    @property
    def pending_writes(self) -> int:
        """Reports and events handed over and not yet in Redis."""
        return self._outbox.pending

    def switch_synced(self, report: SyncReport) -> None:
        dpid, version = report.dpid, report.policy_version
        # The report first: it also carries the applied version, so an older report
        # still in flight is written before this urgent version, never after it.
        self._send(dpid, report)
        with self._lock:
            self._applied_pending[dpid] = version
        self._outbox.put(APPLIED_KEY, "applied versions", self._write_applied, urgent=True)

    def _write_applied(self) -> None:
        """Every confirmation handed over since the last write, in one transaction: after a
        change, ten switches confirm within milliseconds of each other."""
        with self._lock:
            pending, self._applied_pending = self._applied_pending, {}
        try:
            self.switches.set_applied_many(pending, self.controller_id)
        except Exception:
            with self._lock:  # kept for the next attempt; a newer confirmation wins
                self._applied_pending = {**pending, **self._applied_pending}
            raise

    def _write_report(self, report: SyncReport) -> None:
        self.switches.report(switch_report(report, self.controller_id))

    def switch_gone(self, dpid: int) -> None:
        with self._lock:
            self._applied_pending.pop(dpid, None)  # its removal takes the version with it
        self._send(dpid, None)
        self._outbox.put(
            ("flows", dpid), f"flow view of switch {dpid:016x}", lambda: self.flows.remove(dpid)
        )
        self._outbox.put(
            ("queues", dpid), f"queues of switch {dpid:016x}", lambda: self.queues.remove(dpid)
        )

    def flows_reclassified(self, changes: list[Reclassification]) -> None:
        """One event per reclassification, in order; held while Redis is down."""
        for change in changes:
            data = {
                "switch": f"{change.dpid:016x}",
                "flow": str(change.flow),
                "from": change.from_class,
                "to": change.to_class,
                "reason": change.reason,
                "bytes": change.bytes,
                "latency_s": change.latency_s,
            }
            self._outbox.append(
                "reclassification event", partial(self.events.append, "reclassified", data)
            )

    def flows_observed(self, dpid: int, flows: list[ObservedFlow]) -> None:
        records = [FlowRecord.observed(dpid, seen) for seen in flows]
        self._outbox.put(
            ("flows", dpid),
            f"flow view of switch {dpid:016x}",
            partial(self.flows.publish, dpid, records),
        )

    def fabric_changed(self, snapshot: FabricSnapshot) -> None:
        """Publish the fabric snapshot: a whole state, so only the latest is kept."""
        self._outbox.put("fabric", "fabric snapshot", partial(self.fabric.publish, snapshot))

    def fabric_events(self, events: list[FabricEvent]) -> None:
        """One stream entry per event, with its kind, in order; held while Redis is down."""
        for event in events:
            self._outbox.append(
                f"{event.kind} event", partial(self.events.append, event.kind, event.data)
            )

    def queues_observed(self, dpid: int, queues: list[QueueStats]) -> None:
        self._outbox.put(
            ("queues", dpid),
            f"queues of switch {dpid:016x}",
            partial(self.queues.publish, dpid, queues),
        )

    def queue_drops(self, dpid: int, dropped: list[tuple[QueueStats, int]]) -> None:
        for queue, count in dropped:
            data = {
                "switch": f"{dpid:016x}",
                "port": queue.port,
                "class": queue.traffic_class,
                "dropped": count,
                "backlog_bytes": queue.backlog_bytes,
            }
            self._outbox.append(
                "queue-drops event", partial(self.events.append, "queue-drops", data)
            )

    def mastership_changed(self, changes: Sequence[Change]) -> None:
        """One ``mastership`` event per change (took, released, stepped down), in order;
        held while Redis is down."""
        for change in changes:
            self._outbox.append(
                "mastership event", partial(self.events.append, EVENT_KIND, change.data())
            )

    def switch_refused(self, dpid: int, address: str, reason: str) -> None:
        data = {"switch": f"{dpid:016x}", "address": address, "reason": reason}
        self._outbox.append(
            "switch-refused event", partial(self.events.append, "switch-refused", data)
        )

    def _send(self, dpid: int, report: SyncReport | None) -> None:
        """Queue the switch's report; the latest is kept to re-send to a Redis that lost it."""
        with self._lock:  # remembered and queued as one step (see ``_resend_reports``)
            if report is None:
                self._latest.pop(dpid, None)
            else:
                self._latest[dpid] = report
            self._put_report(dpid, report)

    def _put_report(self, dpid: int, report: SyncReport | None) -> None:
        # Built on the writer thread: a report carries every flow, and the actor that
        # hands it over has the next switch change to get to.
        write = (
            partial(self.switches.remove, dpid, self.controller_id)
            if report is None
            else partial(self._write_report, report)
        )
        self._outbox.put(("report", dpid), f"report of switch {dpid:016x}", write)
