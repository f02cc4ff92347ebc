"""The stores a request works with, built once per app and handed to routes by FastAPI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import redis
from fastapi import Depends, Request

from controller.api.applied_watch import AppliedWatch
from controller.api.audit import AUDIT_MAX_LEN, ENTRY_MAX_BYTES
from controller.api.settings import ApiSettings
from controller.store.client import connect
from controller.store.events import EventStore
from controller.store.fabric import FabricStore
from controller.store.flows import FlowStore
from controller.store.jobs import JobStore
from controller.store.policies import PolicyStore
from controller.store.queues import QueueStore
from controller.store.switches import SwitchReport, SwitchStore
from controller.store.tokens import TokenStore


@dataclass(frozen=True, slots=True)
class Services:
    settings: ApiSettings
    redis: redis.Redis
    policies: PolicyStore
    switches: SwitchStore
    jobs: JobStore
    events: EventStore
    flows: FlowStore
    fabric: FabricStore
    tokens: TokenStore
    audit: EventStore
    queues: QueueStore
    applied_watch: AppliedWatch
    """Wakes waiting writes on every confirmation; started and stopped by the app's lifespan."""

    @staticmethod
    def connect(settings: ApiSettings) -> Services:
        """No I/O: the client connects on first use, so an app starts while Redis is down
        and serves as soon as it is back (the pool opens fresh connections)."""
        client = connect(settings.redis_url)
        events = EventStore(client, settings.prefix)
        switches = SwitchStore(client, settings.prefix)
        return Services(
            settings,
            client,
            PolicyStore(
                client, settings.prefix, history_limit=settings.history_limit, events=events
            ),
            switches,
            JobStore(client, settings.prefix),
            events,
            FlowStore(client, settings.prefix),
            FabricStore(client, settings.prefix),
            TokenStore(client, settings.prefix),
            EventStore(
                client, settings.prefix, AUDIT_MAX_LEN, name="audit", max_data_bytes=ENTRY_MAX_BYTES
            ),
            QueueStore(client, settings.prefix),
            AppliedWatch(client, switches.applied_channel),
        )

    def live_reports(self) -> list[SwitchReport]:
        return self.switches.live_reports(self.settings.controller_max_age_s)

    def live_switches(self) -> list[str]:
        """dpids of live controllers' switches, without parsing their (large) reports."""
        return self.switches.live_switches(self.settings.controller_max_age_s)

    def live_applied(self) -> dict[str, int]:
        """dpid → applied version, for the switches of live controllers only.

        The applied hash outlives a crashed controller; its switches are not
        connected to anything, so they do not count.
        """
        live = set(self.live_switches())
        return {dpid: v for dpid, v in sorted(self.switches.applied().items()) if dpid in live}


def get_services(request: Request) -> Services:
    services = request.app.state.services
    assert isinstance(services, Services)
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
