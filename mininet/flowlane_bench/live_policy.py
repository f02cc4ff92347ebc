"""Change policy over REST while training and inference run, and undo it.

The isolation topology runs under the whole stack (``flowlane up``: Redis,
controller, API). With training saturating the server's 50 Mbit port, the
scenario measures inference latency three times: under the isolation
policy, after moving the inference port into the training class with
``PUT /v1/policy?wait=applied``, and after ``POST /v1/policy/rollback``.
After each step the switch must hold exactly the active version's flows.

    python -m flowlane_bench.live_policy
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from controller.policy.load import parse_policy
from flowlane_bench import harness, isolation
from flowlane_bench.topologies import SWITCH, SingleSwitchTopo

POLICY = isolation.POLICIES / "isolation.yaml"
INFERENCE_RULE = "triton"


@dataclass
class Phase:
    name: str
    version: int
    latency: dict[str, Any]
    apply_ms: float | None = None


def _put(
    api: str, auth: dict[str, str], document: dict[str, Any], version: int
) -> tuple[int, float]:
    started = time.monotonic()
    response = httpx.put(
        f"{api}/v1/policy",
        json=document,
        params={"wait": "applied", "timeout": 20, "comment": "live-policy scenario"},
        headers={**auth, "If-Match": f'"{version}"'},
        timeout=30,
    )
    response.raise_for_status()
    return int(response.json()["version"]), 1000 * (time.monotonic() - started)


def _rollback(api: str, auth: dict[str, str], to_version: int, current: int) -> tuple[int, float]:
    started = time.monotonic()
    response = httpx.post(
        f"{api}/v1/policy/rollback",
        json={"version": to_version},
        params={"wait": "applied", "timeout": 20},
        headers={**auth, "If-Match": f'"{current}"'},
        timeout=30,
    )
    response.raise_for_status()
    return int(response.json()["version"]), 1000 * (time.monotonic() - started)


def moved_to_training(document: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    for rule in changed["rules"]:
        if rule["name"] == INFERENCE_RULE:
            rule["class"] = "training"
    return changed


def run(
    config: isolation.ScenarioConfig,
    phase_s: float,
    workdir: Path,
    on_stack: Callable[[harness.StackProcess], None] | None = None,
) -> list[Phase]:
    """The three phases; ``on_stack`` is called with the stack once it is up (a test records
    the processes it started, to check afterwards that they are gone)."""
    harness.check_prerequisites()
    ofp_port = harness.free_port()
    topo = SingleSwitchTopo(training_senders=config.training_senders, inference_clients=1)
    phases: list[Phase] = []
    with (
        harness.stack(POLICY, workdir / "stack.log", ofp_port) as stack,
        harness.network(topo, ofp_port) as net,
    ):
        if on_stack is not None:
            on_stack(stack)
        ports = [intf.name for intf in net.get(SWITCH).intfList() if intf.name != "lo"]
        client, server = net.get("infer1"), net.get("server")

        def active() -> tuple[int, dict[str, Any]]:
            body = httpx.get(f"{stack.api}/v1/policy", timeout=10, headers=stack.headers).json()
            return int(body["version"]), body["policy"]

        def measure(
            name: str, version: int, apply_ms: float | None, may_starve: bool = False
        ) -> None:
            harness.wait_in_sync(SWITCH, parse_policy(active()[1]), ports)
            latency = isolation.run_client(
                client, server.IP(), config, phase_s, may_starve=may_starve
            )
            phases.append(Phase(name, version, latency, apply_ms))

        try:
            first, document = active()
            with isolation.servers(net, config):
                iperfs = isolation.start_training(net, config, 3 * phase_s + 30)
                try:
                    time.sleep(config.ramp_s)
                    measure("isolation policy", first, None)
                    moved, moved_ms = _put(
                        stack.api, stack.headers, moved_to_training(document), first
                    )
                    measure("inference moved to training", moved, moved_ms, may_starve=True)
                    back, back_ms = _rollback(stack.api, stack.headers, first, moved)
                    measure("rolled back", back, back_ms)
                finally:
                    for process in iperfs:
                        harness.stop_process(process)
        except Exception as exc:
            raise isolation.ScenarioError(
                f"{exc}\n{harness.diagnostics(SWITCH, ports, stack.log())}"
            ) from exc
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--phase", type=float, default=6.0, help="seconds measured per phase")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flowlane-live-") as tmp:
        phases = run(isolation.ScenarioConfig(), args.phase, Path(tmp))
    for phase in phases:
        print(
            json.dumps(
                {
                    "phase": phase.name,
                    "version": phase.version,
                    "apply_ms": phase.apply_ms,
                    "latency_ms": phase.latency["latency_ms"],
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
