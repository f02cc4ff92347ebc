"""Request bodies → documents and models, or a 422 listing every error with its path.

Bodies are decoded here rather than by FastAPI: FastAPI answers 400 to a body
that is not UTF-8, and its JSON parser is laxer than ours.  Decoding here makes
every problem, malformed JSON included, the same 422 with the same paths
``flowlane policy validate`` prints.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError

from controller.api.errors import invalid_input, validation_errors
from controller.policy.errors import FieldError, PolicyError
from controller.policy.load import parse_policy
from controller.policy.model import Policy

SOURCE = "request body"
DOCUMENT = "(document)"

Model = TypeVar("Model", bound=BaseModel)


CONTROL_CHARACTERS: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""C0/C1 controls (NUL, ESC, CSI...), DEL and bidirectional overrides: free text the API
stores is printed on operators' terminals, where these are commands, not text."""


def control_character_error(value: str) -> str | None:
    """Why ``value`` may not be stored as a comment or name (None: it may)."""
    found = CONTROL_CHARACTERS.search(value)
    if found is None:
        return None
    return (
        f"control characters are not allowed (U+{ord(found.group()):04X} at character"
        f" {found.start()}): it is shown on terminals, where they act as commands"
    )


class BodyError(ValueError):
    """The body is not one strict JSON value; the message says why."""


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def decode_json(body: bytes, expected: str = "a JSON document") -> object:
    """Strict JSON: no NaN/Infinity, valid Unicode (no lone surrogates), bounded nesting."""
    if not body.strip():
        raise BodyError(f"empty body: send {expected}")
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError:
        raise BodyError("invalid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, our constants
        raise BodyError(f"invalid JSON: {exc}") from None
    try:
        # A "\ud800" escape decodes to a string that cannot be stored or sent back as UTF-8.
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BodyError("invalid JSON: a \\u escape is a lone surrogate, not a character") from None
    except RecursionError:
        raise BodyError("invalid JSON: nested too deeply") from None
    return value


def validate_body(body: bytes) -> tuple[dict[str, Any], Policy]:
    """The policy document as sent (what is stored) and the policy it describes."""
    try:
        document = decode_json(body, "the policy document as JSON")
        policy = parse_policy(document, source=SOURCE)
    except BodyError as exc:
        raise PolicyError([FieldError(DOCUMENT, str(exc))], SOURCE) from None
    except RecursionError:
        raise PolicyError([FieldError(DOCUMENT, "nested too deeply")], SOURCE) from None
    assert isinstance(document, dict)  # parse_policy accepts nothing else
    return document, policy


def parse_model(body: bytes, model: type[Model]) -> Model:
    """A small JSON body (``{"version": 3}``) as ``model``; a 422 with paths otherwise."""
    try:
        return model.model_validate(decode_json(body))
    except BodyError as exc:
        raise invalid_input([FieldError(DOCUMENT, str(exc))], SOURCE) from None
    except ValidationError as exc:
        raise invalid_input(validation_errors(exc, model), SOURCE) from None


def model_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` documenting a body the route reads itself (see ``parse_model``)."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
            },
        }
    }
