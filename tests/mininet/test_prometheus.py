"""Debian's real Prometheus scraping the controller and the API of a running stack: the
rules load, both targets are up, and a query for per-class queue bytes returns series for
the test's switch once traffic crossed it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from flowlane_bench import harness
from flowlane_bench.topologies import SWITCH, SingleSwitchTopo

from controller.policy.load import load_policy_file

pytestmark = pytest.mark.mininet

DEPLOY = harness.REPO / "deploy" / "prometheus"
PORTS = [f"{SWITCH}-eth{n}" for n in (1, 2, 3)]


def prometheus_config(directory: Path, controller: str, api: str, token_file: Path) -> Path:
    """The shipped configuration, pointed at this test's ports and token, scraping each second."""
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(DEPLOY / "flowlane-rules.yml")]
    for job in config["scrape_configs"]:
        if job["job_name"] == "flowlane-controller":
            job["static_configs"] = [{"targets": [controller]}]
        else:
            job["static_configs"] = [{"targets": [api]}]
            job["authorization"]["credentials_file"] = str(token_file)
    path = directory / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def query(base: str, expr: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{base}/api/v1/query", params={"query": expr}, timeout=5)
    response.raise_for_status()
    result: list[dict[str, Any]] = response.json()["data"]["result"]
    return result


def test_prometheus_scrapes_per_class_queue_bytes_of_the_switch(tmp_path: Path) -> None:
    harness.check_prerequisites()
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus not found: apt-get install prometheus (deploy/setup.sh does)")
    ofp_port, metrics_port, web_port = (harness.free_port() for _ in range(3))
    policy = harness.REPO / "policies" / "default.yaml"
    with (
        harness.stack(policy, tmp_path / "stack.log", ofp_port, metrics_port=metrics_port) as stack,
        harness.network(SingleSwitchTopo(training_senders=1, inference_clients=1), ofp_port) as net,
    ):
        token_file = tmp_path / "prometheus.token"
        token_file.write_text(stack.headers["Authorization"].removeprefix("Bearer "))
        config = prometheus_config(
            tmp_path, f"127.0.0.1:{metrics_port}", stack.api.removeprefix("http://"), token_file
        )
        log = (tmp_path / "prometheus.log").open("wb")
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{web_port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{web_port}"
        try:
            dpid = harness.datapath_id(SWITCH)
            harness.wait_in_sync(SWITCH, load_policy_file(policy), PORTS)
            assert net.ping([net.get("infer1"), net.get("server")], timeout=2) == 0

            def ready() -> bool:
                try:
                    return httpx.get(f"{base}/-/ready", timeout=1).status_code == 200
                except httpx.HTTPError:
                    return process.poll() is not None

            harness.wait_for("prometheus", ready, 30)
            assert process.poll() is None, (tmp_path / "prometheus.log").read_text()
            harness.wait_for(
                "both targets up",
                lambda: (
                    sorted(r["metric"]["job"] for r in query(base, "up == 1"))
                    == ["flowlane-api", "flowlane-controller"]
                ),
                30,
            )
            wanted = f'flowlane_queue_sent_bytes_total{{dpid="{dpid}"}} > 0'
            harness.wait_for("per-class queue bytes", lambda: bool(query(base, wanted)), 30)
            series = query(base, f'flowlane_queue_sent_bytes_total{{dpid="{dpid}"}}')
            classes = {r["metric"]["class"] for r in series}
            ports = {r["metric"]["port"] for r in series}
            print(f"\nprometheus: {len(series)} queue series for {dpid}: {sorted(ports)}")
            assert classes == {"inference", "training", "best-effort"}
            assert set(PORTS) <= ports
            assert query(base, "flowlane_policy_active_version") != []
            rules = httpx.get(f"{base}/api/v1/rules", timeout=5).json()["data"]["groups"]
            alerts = {r["name"] for g in rules for r in g["rules"] if r["type"] == "alerting"}
            shipped = yaml.safe_load((DEPLOY / "flowlane-rules.yml").read_text())["groups"]
            assert alerts == {r["alert"] for g in shipped for r in g["rules"] if "alert" in r}
            assert "FlowlaneLatencyClassDropping" in alerts
            firing = httpx.get(f"{base}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
            assert [a for a in firing if a["state"] == "firing"] == []
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
            log.close()
