"""Stored text is printed as it is (issue 24, finding 8): a policy comment holding rich
markup, escape sequences or NUL neither crashes the CLI nor reaches the terminal as a
command, and the API refuses control characters in what it stores."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import httpx
import pytest
import redis
from rich.text import Text
from typer.testing import CliRunner

from controller.cli.main import app
from controller.cli.render import SafeConsole, clean, plain, safe, version_note
from controller.policy.load import read_document_file
from controller.store.policies import PolicyStore

REPO = Path(__file__).resolve().parents[2]
DOCUMENT = read_document_file(REPO / "policies" / "examples" / "fifo.yaml")
ENV = {"COLUMNS": "250"}
HOSTILE = "[/bold] [link=https://evil.example]x[/link] \x1b]0;pwned\x07 \x1b[2J \x00 \u202eevil"
"""Markup that crashes rich, a hyperlink, a terminal title, a screen clear, NUL, a bidi
override: each was written to the terminal (or crashed it) before."""


def _stored_with(redis_client: redis.Redis, comment: str) -> None:
    """A version whose comment was stored before the API refused control characters."""
    assert isinstance(DOCUMENT, dict)
    PolicyStore(redis_client).write(DOCUMENT, author="old-api", comment=comment)


def test_clean_shows_every_control_character_as_an_escape() -> None:
    assert clean("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert clean("x\ny\tz\x00\x7f\x9b\u202e") == "x\\x0ay\\x09z\\x00\\x7f\\x9b\\u202e"
    assert clean("plain [text] é") == "plain [text] é"
    assert safe("[/bold]") == "\\[/bold]"
    assert plain("[red]x[/]").plain == "[red]x[/]"


def test_version_note_escapes_the_comment() -> None:
    assert version_note(None, "[/bold]\x1b") == ": \\[/bold]\\x1b"


def test_the_console_never_writes_a_control_character_it_did_not_make() -> None:
    buffer = io.StringIO()
    console = SafeConsole(file=buffer, force_terminal=True, width=200)
    console.print(Text("title \x1b]0;pwned\x07 clear \x1b[2J"))  # a Text bypasses markup
    console.print(
        "[/bold] stray close tag", highlight=False
    )  # a markup error prints the text literally
    console.print("[bold]ours[/]")  # the CLI's own styles still work
    output = buffer.getvalue()
    assert "\x1b]0;" not in output and "\x1b[2J" not in output and "\x07" not in output
    assert "[/bold] stray close tag" in output
    assert "\x1b[1mours" in output


def test_policy_history_prints_a_hostile_comment_as_text(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    """Before: MarkupError for every viewer; with valid markup, OSC sequences as is."""
    _stored_with(redis_client, HOSTILE)
    result = runner.invoke(app, ["policy", "history"], env={**ENV, "FLOWLANE_API": api_url})
    assert result.exit_code == 0, result.output
    assert "[/bold] [link=https://evil.example]x[/link] \\x1b]0;pwned\\x07" in result.stdout
    assert "\\x1b[2J \\x00 \\u202eevil" in result.stdout
    for raw in ("\x1b", "\x00", "\x07", "\u202e"):
        assert raw not in result.output
    shown = runner.invoke(app, ["policy", "show"], env={**ENV, "FLOWLANE_API": api_url})
    assert shown.exit_code == 0, shown.output
    assert "\\[/bold]" not in shown.stdout and "[/bold]" in shown.stdout
    assert "\x1b" not in shown.output


def test_events_print_a_hostile_comment_as_text(
    runner: CliRunner, api_url: str, redis_client: redis.Redis
) -> None:
    _stored_with(redis_client, HOSTILE)
    result = runner.invoke(app, ["events"], env={**ENV, "FLOWLANE_API": api_url})
    assert result.exit_code == 0, result.output
    assert "[/bold]" in result.stdout and "\\x1b]0;pwned" in result.stdout
    assert "\x1b" not in result.output and "\x00" not in result.output
    as_json = runner.invoke(app, ["events", "--json"], env={**ENV, "FLOWLANE_API": api_url})
    events = json.loads(as_json.stdout)["events"]  # JSON: as stored, escaped by the encoder
    assert [e["comment"] for e in events if e["kind"] == "policy"] == [HOSTILE]
    assert "\x1b" not in as_json.stdout


@pytest.mark.parametrize(
    "comment", ["\x1b]0;pwned\x07", "nul\x00", "two\nlines", "del\x7f", "csi\x9b", "\u202e"]
)
def test_the_api_refuses_control_characters_in_a_comment(api_url: str, comment: str) -> None:
    headers = {"Authorization": f"Bearer {os.environ['FLOWLANE_TOKEN']}"}
    answer = httpx.put(
        f"{api_url}/v1/policy", params={"comment": comment}, json=DOCUMENT, headers=headers
    )
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["errors"]
    assert error["path"] == "query.comment"
    assert "control characters are not allowed" in error["message"]
    assert httpx.get(f"{api_url}/v1/policy", headers=headers).status_code == 404  # not stored


def test_the_api_stores_markup_as_plain_text_and_the_cli_shows_it(
    runner: CliRunner, api_url: str
) -> None:
    """``[/bold]`` is printable text: stored as sent, shown as sent (the issue's reproducer)."""
    headers = {"Authorization": f"Bearer {os.environ['FLOWLANE_TOKEN']}"}
    answer = httpx.put(
        f"{api_url}/v1/policy", params={"comment": "[/bold]"}, json=DOCUMENT, headers=headers
    )
    assert answer.status_code == 201, answer.text
    result = runner.invoke(app, ["policy", "history"], env={**ENV, "FLOWLANE_API": api_url})
    assert result.exit_code == 0, result.output
    assert "[/bold]" in result.stdout


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/tokens", {"name": "a\x1b]0;x", "role": "viewer"}),
        ("/v1/tokens", {"name": "viewer", "role": "viewer", "tenant": "t\x00"}),
        ("/v1/jobs", {"name": "job\x1b[2J", "class": "training", "endpoints": ["10.0.0.1"]}),
    ],
)
def test_names_with_control_characters_are_refused_naming_the_field(
    api_url: str, path: str, body: dict[str, object]
) -> None:
    headers = {"Authorization": f"Bearer {os.environ['FLOWLANE_TOKEN']}"}
    answer = httpx.post(f"{api_url}{path}", json=body, headers=headers)
    assert answer.status_code == 422, answer.text
    paths = [error["path"] for error in answer.json()["errors"]]
    assert any(p.endswith(("name", "tenant")) for p in paths), paths
