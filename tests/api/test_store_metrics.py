"""The API's /metrics also says what the store holds: the active policy version, each
controller's heartbeat age, and whether Redis answered."""

from __future__ import annotations

import time
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.api.metrics import StoreCollector
from controller.store.errors import StoreUnavailableError
from controller.store.switches import SwitchStore


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_carry_the_active_version_and_heartbeat_ages(
    client: TestClient, document: dict[str, Any], switches: SwitchStore
) -> None:
    client.put("/v1/policy", json=document)
    client.put("/v1/policy", json={**document, "rules": []})
    switches.heartbeat("ctl-a", now=time.time() - 4)
    scraped = samples(client.get("/metrics").text)
    assert scraped[("flowlane_policy_active_version", ())] == 2
    assert scraped[("flowlane_store_up", ())] == 1
    age = scraped[("flowlane_controller_heartbeat_age_seconds", (("controller", "ctl-a"),))]
    assert 3.5 < age < 30


def test_a_store_that_does_not_answer_is_down_and_nothing_else() -> None:
    def unavailable() -> tuple[int | None, dict[str, float]]:
        raise StoreUnavailableError("Redis unavailable: connection refused")

    registry = CollectorRegistry()
    registry.register(StoreCollector(unavailable))
    scraped = samples(generate_latest(registry).decode())
    assert scraped == {("flowlane_store_up", ()): 0}
