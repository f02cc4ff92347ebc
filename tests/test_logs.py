"""``--log-format json``: every record one JSON object, uvicorn's included; the access log
is off unless asked for."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import httpx

from controller.logs import JsonFormatter

REPO = Path(__file__).resolve().parents[1]


def test_a_record_is_one_json_object_with_its_exception() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "flowlane.controller",
            logging.ERROR,
            __file__,
            1,
            "switch %s: %s",
            ("01", "x"),
            sys.exc_info(),
        )
    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "ERROR" and entry["logger"] == "flowlane.controller"
    assert entry["message"] == "switch 01: x"
    assert "ValueError: boom" in entry["exception"]
    assert entry["time"].endswith("+00:00")


def test_the_api_logs_json_lines_and_no_access_log_by_default(unused_port: int) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller",
            "api",
            "--port",
            str(unused_port),
            "--redis-url",
            "redis://127.0.0.1:1/0",
            "--log-format",
            "json",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{unused_port}/healthz", timeout=1).is_success:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        for _ in range(3):
            httpx.get(f"http://127.0.0.1:{unused_port}/healthz", timeout=1)
    finally:
        process.terminate()
        _, err = process.communicate(10)
    lines = [line for line in err.splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is JSON, or this raises
    messages = [e["message"] for e in entries]
    assert any("Uvicorn running on" in m for m in messages), messages
    assert not any("GET /healthz" in m for m in messages), "access log on by default"
