"""The jobs a scenario registers in flowlane mode: what a scheduler would tell the controller.

A training workload with ``job: <class>`` becomes one job: its hosts as
endpoints, with the ports its flows are sent to, so the controller classifies
the workload's flows from their first packet instead of waiting for
detection.  The documents are what ``POST /v1/jobs`` takes.
"""

from __future__ import annotations

from typing import Any

from flowlane_bench.suite.spec import AllReduceWorkload, BulkWorkload, Scenario

JOB_TTL = "1h"
"""Longer than any run; the runner deletes the jobs with the stack that stored them."""


def workload_jobs(scenario: Scenario) -> list[dict[str, Any]]:
    """One job document per training workload that asks for one."""
    ips = {host.name: host.ip for host in scenario.plan().hosts}
    jobs = []
    for workload in scenario.training:
        if workload.job is None:
            continue
        endpoints: list[dict[str, Any]]
        if isinstance(workload, AllReduceWorkload):
            endpoints = [{"ipv4": ips[host], "ports": [workload.port]} for host in workload.workers]
        else:
            endpoints = _bulk_endpoints(workload, ips)
        jobs.append(
            {
                "name": workload.name,
                "class": workload.job,
                "weight": workload.weight,
                "endpoints": endpoints,
                "ttl": JOB_TTL,
            }
        )
    return jobs


def _bulk_endpoints(workload: BulkWorkload, ips: dict[str, str]) -> list[dict[str, Any]]:
    """Senders with any port; each receiver with the ports its iperf3 servers listen on."""
    ports: dict[str, list[int]] = {}
    for index, flow in enumerate(workload.flows):
        ports.setdefault(flow.dst, []).append(workload.first_port + index)
    endpoints: list[dict[str, Any]] = [
        {"ipv4": ips[host], "ports": sorted(host_ports)} for host, host_ports in ports.items()
    ]
    senders = sorted({flow.src for flow in workload.flows} - set(ports))
    endpoints += [{"ipv4": ips[host]} for host in senders]
    return endpoints
