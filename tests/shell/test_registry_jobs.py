"""The registry tells the fabric's owner every new job set, as it tells the switches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from controller.metrics import ControllerMetrics
from controller.openflow.settings import ActivePolicy, ControllerSettings
from controller.policy.jobs import JobSpec
from controller.shell.registry import JobsArrived, Registry, RegistryEvent
from tests.shell.test_registry import POLICY, RecordingSwitches


def test_every_job_set_reaches_the_fabric_owner_in_order() -> None:
    settings = ControllerSettings(
        ActivePolicy(POLICY, 1), metrics=ControllerMetrics(CollectorRegistry())
    )
    told: list[tuple[JobSpec, ...]] = []

    def schedule(delay: float, event: RegistryEvent) -> Callable[[], None]:
        return lambda: None

    policies: list[Any] = []
    registry = Registry(settings, RecordingSwitches(), schedule, policies.append, told.append)
    job = JobSpec.model_validate(
        {"name": "j", "class": "inference", "endpoints": [{"ipv4": "10.0.0.1"}]}
    )
    registry.receive(JobsArrived((job,)))
    registry.receive(JobsArrived(()))
    assert told == [(job,), ()]
    assert registry.snapshot.jobs == () and registry.snapshot.jobs_version == 2
