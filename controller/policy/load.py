"""Turn a YAML file or a decoded document into a validated ``Policy``, or every error in it."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml
from pydantic import ValidationError
from yaml.events import AliasEvent, CollectionStartEvent, ScalarEvent
from yaml.nodes import Node

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


MAX_YAML_BYTES: Final = 1024 * 1024
"""The largest policy or scenario file read (1 MiB; the shipped ones are a few KiB)."""

_NO_ALIASES = (
    "YAML anchors and aliases (&name, *name, <<: *name) are not accepted: a few hundred"
    " bytes of them expand to gigabytes; write the repeated part out"
)


class _NoAliasError(yaml.YAMLError):
    def __init__(self, mark: object) -> None:
        super().__init__(_NO_ALIASES)
        self.problem = _NO_ALIASES
        self.problem_mark = mark


class SafeNoAliasLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses anchors and aliases before composing anything.

    Aliases are what make a tiny file expand exponentially ("billion laughs"): the
    safe loader still expands them (a 700-byte file took 17.6 s and 2.4 GB). An anchor
    is refused as well, with the alias, so the error points at the first of them.
    """

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent) or (
            isinstance(event, (ScalarEvent, CollectionStartEvent)) and event.anchor is not None
        ):
            raise _NoAliasError(event.start_mark)
        return super().compose_node(parent, index)


def read_yaml(text: str, source: str = "policy") -> object:
    """Decode YAML, turning syntax errors into a ``PolicyError`` with line and column.

    Anchors and aliases are refused, and so is a text above ``MAX_YAML_BYTES``."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_YAML_BYTES:
        raise PolicyError(
            [
                FieldError(
                    "(file)", f"{size} bytes, more than the {MAX_YAML_BYTES} a policy may have"
                )
            ],
            source,
        )
    try:
        return yaml.load(text, Loader=SafeNoAliasLoader)  # a SafeLoader subclass
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
        # The size is checked before reading, so a huge file is never loaded into memory.
        size = path.stat().st_size
        if size > MAX_YAML_BYTES:
            raise PolicyError(
                [FieldError("(file)", f"{size} bytes, more than the {MAX_YAML_BYTES} allowed")],
                str(path),
            )
        with path.open("rb") as handle:  # read at most the bound: /dev/zero has size 0
            raw = handle.read(MAX_YAML_BYTES + 1)
        text = raw.decode("utf-8")
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
