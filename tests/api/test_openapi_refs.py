"""Every ``$ref`` in the published OpenAPI document resolves (clients generate code from it)."""

from __future__ import annotations

import json
import re

from controller.api.app import create_app
from controller.api.settings import ApiSettings


def test_no_dangling_schema_references() -> None:
    schema = create_app(ApiSettings(redis_url="redis://127.0.0.1:1/0")).openapi()
    defined = set(schema["components"]["schemas"])
    referenced = set(re.findall(r"#/components/schemas/([A-Za-z0-9_.-]+)", json.dumps(schema)))
    assert referenced <= defined, sorted(referenced - defined)
    assert "RollbackIn" in defined
