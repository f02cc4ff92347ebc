"""Turn a YAML file or a decoded document into a validated ``Policy``, or every error in it."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from controller.policy.checks import cross_field_errors, semantic_errors
from controller.policy.errors import FieldError, PolicyError, field_errors
from controller.policy.model import Policy
from controller.policy.parts import document_parts


def parse_policy(document: object, source: str = "policy") -> Policy:
    """Validate a decoded document; raise ``PolicyError`` listing every problem.

    Structural errors come first, then the cross-field ones among whatever
    parsed (``controller.policy.parts``), so one pass shows them all.  Any
    error rejects the whole document: a policy is installed whole or not at all.
    """
    if not isinstance(document, dict):
        kind = "empty" if document is None else type(document).__name__
        raise PolicyError(
            [FieldError("(document)", f"a policy is a mapping of sections, got {kind}")], source
        )
    try:
        policy = Policy.model_validate(document)
    except ValidationError as exc:
        errors = field_errors(exc, Policy)
        raise PolicyError(
            [*errors, *cross_field_errors(document_parts(document))], source
        ) from None
    problems = semantic_errors(policy)
    if problems:
        raise PolicyError(problems, source)
    return policy


def parse_policy_yaml(text: str, source: str = "policy") -> Policy:
    return parse_policy(read_yaml(text, source), source)


def read_yaml(text: str, source: str = "policy") -> object:
    """Decode YAML, turning syntax errors into a ``PolicyError`` with line and column."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(document)"
        problem = getattr(exc, "problem", None) or str(exc)
        raise PolicyError([FieldError(where, f"invalid YAML: {problem}")], source) from None


def load_policy_file(path: Path) -> Policy:
    return load_policy_document(path)[0]


def read_document_file(path: Path) -> object:
    """The YAML document in ``path``, not yet validated (the API validates what it is sent);
    unreadable files and YAML syntax errors become ``PolicyError``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(
            [FieldError("(file)", f"cannot read: {exc.strerror}")], str(path)
        ) from None
    except UnicodeDecodeError as exc:
        raise PolicyError(
            [FieldError("(file)", f"not UTF-8 text (byte {exc.start}): a policy is a YAML file")],
            str(path),
        ) from None
    return read_yaml(text, str(path))


def load_policy_document(path: Path) -> tuple[Policy, dict[str, Any]]:
    """The validated policy and the document it came from (what the store keeps)."""
    document = read_document_file(path)
    policy = parse_policy(document, str(path))
    assert isinstance(document, dict)  # parse_policy accepted it
    return policy, document


def default_policy_path() -> Path:
    """The shipped default policy (package data): what ``flowlane up`` starts with."""
    return Path(str(resources.files("controller.policy").joinpath("default.yaml")))
