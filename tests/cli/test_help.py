"""The CLI's synopsis (``flowlane --help``, the README's) names every command, and a command
that does not exist is answered with the one probably meant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from controller.cli.main import COMMANDS, app, load_command

README = Path(__file__).resolve().parents[2] / "README.md"
WIDE = {"COLUMNS": "200"}


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def readme_synopsis() -> dict[str, list[str]]:
    """The ``flowlane NAME …`` lines of the README's shell blocks, by NAME."""
    lines: dict[str, list[str]] = {}
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            found = re.match(r"flowlane ([a-z]+)\b", line)
            if found and found.group(1) in COMMANDS:
                lines.setdefault(found.group(1), []).append(line)
    return lines


def subcommands(name: str) -> list[str]:
    command = load_command(name)
    if not isinstance(command, typer.core.TyperGroup):
        return []
    return [sub for sub, cmd in command.commands.items() if not cmd.hidden]


def test_the_readme_synopsis_names_every_command_and_subcommand() -> None:
    """`jobs list/delete`, `flows`, `events` and `topology` were missing from it."""
    synopsis = readme_synopsis()
    assert sorted(synopsis) == sorted(COMMANDS)
    for name in COMMANDS:
        wanted = set(subcommands(name))
        # One line of the synopsis names them all (others are examples of one use).
        assert any(wanted <= set(re.findall(r"[a-z]+", line)) for line in synopsis[name]), (
            f"no README line `flowlane {name} …` names all of {sorted(wanted)}"
        )


def test_the_help_lists_every_command(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--help"], env=WIDE)
    assert result.exit_code == 0
    listed = re.findall(r"^│ ([a-z]+) ", result.stdout, re.M)
    assert listed == list(COMMANDS)


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["jobs", "remove", "train"], "No such command 'remove'. Did you mean 'delete'?"),
        (["jobs", "rm", "train"], "No such command 'rm'. Did you mean 'delete'?"),
        (["token", "remove", "ci"], "No such command 'remove'. Did you mean 'revoke'?"),
        (["job", "list"], "No such command 'job'. Did you mean 'jobs'?"),
        (["policy", "undo", "1"], "No such command 'undo'. Did you mean 'rollback'?"),
        (["scenario", "ls"], "No such command 'ls'. Did you mean 'list'?"),
    ],
)
def test_an_unknown_command_names_the_one_meant(
    runner: CliRunner, args: list[str], hint: str
) -> None:
    result = runner.invoke(app, args, env=WIDE)
    assert result.exit_code == 2
    assert hint in flat(result.output)


def test_an_unknown_command_with_no_likely_meaning_says_only_that(runner: CliRunner) -> None:
    result = runner.invoke(app, ["frobnicate"], env=WIDE)
    assert result.exit_code == 2
    assert "No such command 'frobnicate'." in flat(result.output)
    assert "Did you mean" not in result.output


def test_suggestions_put_synonyms_before_spellings() -> None:
    from controller.cli.groups import suggestions

    assert suggestions("remove", ["add", "list", "delete"]) == ["delete"]
    assert suggestions("lsit", ["add", "list", "delete"]) == ["list"]
    assert suggestions("revoke", ["add", "list", "delete"]) == []
