"""The policy document in the OpenAPI schema, as operators write it.

The schema comes from the pydantic model, corrected where the model parses
richer input than its type says: a port field takes ``8000``, ``"8000-8010"``
or a list of those (the model stores merged ranges); ``eth_type`` and
``ip_proto`` take names as well as numbers; a rate is ``"50Mbit"``,
``"20%"`` or a bare integer of bit/s.  Validation itself stays with
``parse_policy``; this is documentation, and what schemathesis generates
requests from.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from controller.api.auth import mark_openapi
from controller.policy.model import Policy

POLICY_SCHEMA = "Policy"
REF_TEMPLATE = "#/components/schemas/{model}"

POLICY_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A policy document, as the YAML file but in JSON",
        "content": {"application/json": {"schema": {"$ref": REF_TEMPLATE.format(model="Policy")}}},
    }
}
"""``openapi_extra`` of the routes that take a policy document as their body."""

_PORT = {"type": "integer", "minimum": 0, "maximum": 65535}
_PORT_ITEM = {
    "anyOf": [_PORT, {"type": "string", "examples": ["8000", "8000-8010"]}],
}
_PORT_SET = {
    "anyOf": [
        *_PORT_ITEM["anyOf"],
        {"type": "array", "items": _PORT_ITEM, "minItems": 1},
        {"type": "null"},
    ],
    "default": None,
    "description": "A port, a range such as '8000-8010', or a list of those",
}
_RATE = {
    "anyOf": [
        {"type": "string", "examples": ["50Mbit", "20%"]},
        {"type": "integer", "minimum": 1},
    ],
    "description": "bit, Kbit, Mbit, Gbit (decimal), a % of the port rate, or bit/s as a number",
}
_ABSOLUTE_RATE = {
    "anyOf": [
        {"type": "string", "examples": ["10Gbit", "50Mbit"]},
        {"type": "integer", "minimum": 1},
    ],
    "description": "bit, Kbit, Mbit, Gbit (decimal), or bit/s as a number",
}


def _named_number(maximum: int, names: list[str], what: str) -> dict[str, Any]:
    return {
        "anyOf": [
            {"type": "integer", "minimum": 0, "maximum": maximum},
            {"type": "string", "examples": names},
            {"type": "null"},
        ],
        "default": None,
        "description": f"{', '.join(names)} or a number ({what})",
    }


def policy_schemas() -> dict[str, Any]:
    """``Policy`` and the models it uses, keyed by name, for ``components.schemas``."""
    schema = Policy.model_json_schema(by_alias=True, ref_template=REF_TEMPLATE)
    definitions: dict[str, Any] = schema.pop("$defs", {})
    definitions[POLICY_SCHEMA] = schema
    match = definitions["MatchSpec"]["properties"]
    for name in ("tcp_src", "tcp_dst", "udp_src", "udp_dst"):
        match[name] = {**copy.deepcopy(_PORT_SET), "title": match[name].get("title", name)}
    match["eth_type"] = _named_number(0xFFFF, ["ipv4", "ipv6", "arp"], "0x0800, 2048")
    match["ip_proto"] = _named_number(255, ["tcp", "udp", "icmp", "icmpv6"], "6, 17")
    match["in_port"] = {
        "anyOf": [
            {"type": "integer", "minimum": 1, "maximum": 0xFFFFFEFF},
            {"type": "string", "minLength": 1, "examples": ["s1-eth1"]},
            {"type": "null"},
        ],
        "default": None,
        "description": "An OpenFlow port number or an OVS port name",
    }
    for name in ("ipv4_src", "ipv4_dst"):
        match[name] = {
            "anyOf": [{"type": "string", "examples": ["10.0.0.0/24"]}, {"type": "null"}],
            "default": None,
            "description": "An IPv4 network in CIDR notation",
        }
    traffic_class = definitions["TrafficClass"]["properties"]
    traffic_class["min_rate"] = copy.deepcopy(_RATE)
    traffic_class["max_rate"] = {
        "anyOf": [*copy.deepcopy(_RATE["anyOf"]), {"type": "null"}],
        "default": None,
        "description": "The ceiling; defaults to the port rate",
    }
    ports = definitions["PortRates"]["properties"]
    ports["rate"] = {**copy.deepcopy(_ABSOLUTE_RATE), "default": "10Gbit"}
    for value in ports["overrides"].get("patternProperties", {}).values():
        value.clear()
        value.update(copy.deepcopy(_ABSOLUTE_RATE))
    return definitions


def install_openapi(app: FastAPI, body_models: Sequence[type[BaseModel]] = ()) -> None:
    """Generate the schema once, with the policy models added to its components.

    ``body_models`` are the models of bodies routes read themselves
    (``documents.parse_model``): FastAPI does not see them, so they are added here.
    """

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=app.openapi_tags,
            )
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(policy_schemas())
            for model in body_models:
                definition = model.model_json_schema(ref_template="#/components/schemas/{model}")
                for name, nested in definition.pop("$defs", {}).items():
                    components.setdefault(name, nested)
                components.setdefault(model.__name__, definition)
            mark_openapi(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
