"""ControllerMetrics' fabric metrics: names, labels and kinds, on an injected registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from controller.metrics import ControllerMetrics


def families(registry: CollectorRegistry) -> dict[str, tuple[str, dict[tuple[str, ...], float]]]:
    """Family name -> (type, label values of each sample -> value)."""
    found: dict[str, tuple[str, dict[tuple[str, ...], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        values = {
            tuple(f"{k}={v}" for k, v in sorted(sample.labels.items())): sample.value
            for sample in family.samples
            if not sample.name.endswith("_created")
        }
        found[family.name] = (family.type, values)
    return found


def test_fabric_metrics_are_on_the_injected_registry() -> None:
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    metrics.link_tx_bits.labels(switch="0000000000000001", port="3").set(9.5e8)
    metrics.link_utilization.labels(switch="0000000000000001", port="3").set(0.95)
    metrics.placements.labels(reason="elephant").inc()
    metrics.reroutes.labels(reason="link down").inc(2)
    metrics.pinned_flows.set(3)
    metrics.fabric_links.set(4)
    metrics.fabric_hosts.set(2)
    metrics.packet_ins.labels(kind="lldp").inc(5)

    found = families(registry)
    port = ("port=3", "switch=0000000000000001")
    assert found["flowlane_link_tx_bits_per_second"] == ("gauge", {port: 9.5e8})
    assert found["flowlane_link_utilization_ratio"] == ("gauge", {port: 0.95})
    assert found["flowlane_placements"] == ("counter", {("reason=elephant",): 1.0})
    assert found["flowlane_reroutes"] == ("counter", {("reason=link down",): 2.0})
    assert found["flowlane_pinned_flows"] == ("gauge", {(): 3.0})
    assert found["flowlane_fabric_links"] == ("gauge", {(): 4.0})
    assert found["flowlane_fabric_hosts"] == ("gauge", {(): 2.0})
    assert found["flowlane_packet_ins"] == ("counter", {("kind=lldp",): 5.0})


def test_two_controllers_in_one_process_do_not_collide() -> None:
    first, second = ControllerMetrics(CollectorRegistry()), ControllerMetrics(CollectorRegistry())
    first.pinned_flows.set(1)
    assert families(second.registry)["flowlane_pinned_flows"] == ("gauge", {(): 0.0})
