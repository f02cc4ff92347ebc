"""A request body → a policy document and its validated ``Policy``, or every error in it.

The body is decoded here rather than by FastAPI so that every problem,
including malformed JSON, comes back as the same ``PolicyError`` with the
paths ``flowlane policy validate`` prints.
"""

from __future__ import annotations

import json
from typing import Any

from controller.policy.errors import FieldError, PolicyError
from controller.policy.load import parse_policy
from controller.policy.model import Policy

SOURCE = "request body"


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _problem(message: str) -> PolicyError:
    return PolicyError([FieldError("(document)", message)], SOURCE)


def decode_document(body: bytes) -> object:
    """Strict JSON: no NaN/Infinity, valid Unicode (no lone surrogates), bounded nesting."""
    if not body.strip():
        raise _problem("empty body: send the policy document as JSON")
    try:
        document = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise _problem("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, our constants
        raise _problem(f"invalid JSON: {exc}") from None
    try:
        # A "\ud800" escape decodes to a string that cannot be stored or sent back as UTF-8.
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise _problem("invalid JSON: a \\u escape is a lone surrogate, not a character") from None
    except RecursionError:
        raise _problem("invalid JSON: nested too deeply") from None
    return document


def validate_body(body: bytes) -> tuple[dict[str, Any], Policy]:
    """The document as sent (what is stored) and the policy it describes."""
    document = decode_document(body)
    try:
        policy = parse_policy(document, source=SOURCE)
    except RecursionError:
        raise _problem("the document is nested too deeply") from None
    assert isinstance(document, dict)  # parse_policy accepts nothing else
    return document, policy
