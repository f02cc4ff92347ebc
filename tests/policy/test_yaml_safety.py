"""Policy YAML: anchors and aliases refused before anything is expanded, and a size bound
(issue 24, finding 9: a 700-byte file of nested aliases took 17.6 s and 2.4 GB)."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest
from flowlane_bench.suite.spec import ScenarioError, load_scenario
from typer.testing import CliRunner

from controller.cli.main import app
from controller.policy.errors import PolicyError
from controller.policy.load import (
    MAX_YAML_BYTES,
    default_policy_path,
    load_policy_file,
    read_document_file,
    read_yaml,
)

REPO = Path(__file__).resolve().parents[2]


def bomb(levels: int = 9) -> str:
    """The classic "billion laughs": each level lists the one before nine times (9**levels)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{','.join([previous] * 9)}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_its_first_anchor_quickly() -> None:
    text = bomb()
    assert len(text) < 700
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(PolicyError) as caught:
        read_yaml(text, "bomb.yaml")
    elapsed = time.monotonic() - started
    (error,) = caught.value.errors
    assert error.path == "line 1, column 5"
    assert "anchors and aliases" in error.message and "not accepted" in error.message
    # Expanded, this is 9**9 (387 million) strings; refused, it costs nothing measurable.
    assert elapsed < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 50_000  # KiB


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("classes: &c {a: 1}\n", "line 1, column 10"),  # an anchor alone
        ("x: 1\ny: *c\n", "line 2, column 4"),  # an alias to nothing: still named as such
        ("base: &b {priority: 1}\nother:\n  <<: *b\n", "line 1, column 7"),  # merge keys
        ("- &s text\n", "line 1, column 3"),  # an anchored scalar
    ],
)
def test_every_anchor_or_alias_is_refused_with_its_position(text: str, where: str) -> None:
    with pytest.raises(PolicyError) as caught:
        read_yaml(text)
    assert [(e.path, "anchors and aliases" in e.message) for e in caught.value.errors] == [
        (where, True)
    ]


def test_plain_yaml_and_the_shipped_policies_still_load() -> None:
    assert read_yaml("a: [1, 2]\nb: {c: '&not-an-anchor *nor-an-alias'}\n") == {
        "a": [1, 2],
        "b": {"c": "&not-an-anchor *nor-an-alias"},
    }
    load_policy_file(default_policy_path())
    for path in sorted((REPO / "policies" / "examples").glob("*.yaml")):
        read_document_file(path)


def test_a_file_above_the_bound_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("# " + "x" * MAX_YAML_BYTES + "\nclasses: {}\n")
    with pytest.raises(PolicyError) as caught:
        read_document_file(path)
    (error,) = caught.value.errors
    assert error.path == "(file)" and f"more than the {MAX_YAML_BYTES}" in error.message
    with pytest.raises(PolicyError):
        read_yaml("#" * (MAX_YAML_BYTES + 1))


def test_policy_validate_refuses_the_bomb(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb())
    started = time.monotonic()
    result = CliRunner().invoke(app, ["policy", "validate", str(path)])
    assert result.exit_code == 1, result.output
    assert "anchors and aliases" in result.output
    assert time.monotonic() - started < 5


def test_the_controller_refuses_a_policy_with_aliases(tmp_path: Path) -> None:
    """``flowlane controller --policy`` reads through the same loader: exit 2 before it
    listens."""
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb())
    result = CliRunner().invoke(app, ["controller", "--policy", str(path), "--metrics-port", "0"])
    assert result.exit_code == 2, result.output
    assert "anchors and aliases" in result.output


def test_a_scenario_spec_with_aliases_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "laughs.yaml"
    path.write_text(bomb(3))
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, REPO)
    assert any("anchors and aliases" in e.message for e in caught.value.errors)
