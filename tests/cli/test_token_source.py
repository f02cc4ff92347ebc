"""A refused token is traced to where it came from: ``--token``, ``$FLOWLANE_TOKEN`` or the
token file. The message named only the file, so a stale ``$FLOWLANE_TOKEN`` (which comes
first) sent people to fix a file that was fine."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from controller.auth.files import TOKEN_ENV, TOKEN_FILE_ENV
from controller.cli.main import app

BAD = "flt_not-a-token"


def flat(text: str) -> str:
    return " ".join(text.split())


def switches(runner: CliRunner, api_url: str, *options: str, **env: str | None) -> Result:
    result = runner.invoke(
        app, [*options, "switches", "--api", api_url], env={"COLUMNS": "250", **env}
    )
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result


@pytest.fixture
def good_file(tmp_path: Path) -> Path:
    """A token file nobody reads unless the others are absent; it need not be valid."""
    path = tmp_path / "token"
    path.write_text("flt_in-the-file\n", encoding="utf-8")
    return path


def test_a_bad_environment_token_is_named_as_such(
    runner: CliRunner, api_url: str, good_file: Path
) -> None:
    result = switches(runner, api_url, **{TOKEN_ENV: BAD, TOKEN_FILE_ENV: str(good_file)})
    assert result.exit_code == 5
    assert (
        "error: not authorized: invalid token: unknown, revoked or expired; the token sent came"
        f" from ${TOKEN_ENV}, which comes before the token file {good_file}: set it to a valid"
        " token, or unset it"
    ) in flat(result.stderr)


def test_a_bad_option_token_is_named_as_such(
    runner: CliRunner, api_url: str, good_file: Path
) -> None:
    result = switches(runner, api_url, "--token", BAD, **{TOKEN_FILE_ENV: str(good_file)})
    assert result.exit_code == 5
    warning, error = result.stderr.split("\n", 1)
    assert "the token sent came from --token: pass a valid one" in flat(error)
    assert TOKEN_ENV not in error  # the refusal blames the option, not the variable
    # and the option itself is named as a leak: ps shows it to every user
    assert warning.startswith("warning: --token puts the token on the command line")


def test_a_bad_token_file_is_named_by_its_path(
    runner: CliRunner, api_url: str, good_file: Path
) -> None:
    result = switches(runner, api_url, "--token-file", str(good_file), **{TOKEN_ENV: None})
    assert result.exit_code == 5
    assert (
        f"the token sent came from the token file {good_file}: put a valid token there,"
        " or pass --token"
    ) in flat(result.stderr)


def test_no_token_anywhere_says_where_one_may_go(
    runner: CliRunner, api_url: str, tmp_path: Path
) -> None:
    missing = tmp_path / "absent"
    result = switches(runner, api_url, **{TOKEN_ENV: None, TOKEN_FILE_ENV: str(missing)})
    assert result.exit_code == 5
    assert (
        f"no token was sent: pass --token, set ${TOKEN_ENV}, or put a token in {missing}"
    ) in flat(result.stderr)


def test_a_good_environment_token_still_works(runner: CliRunner, api_url: str) -> None:
    result = switches(runner, api_url)  # the fixture's admin token is in $FLOWLANE_TOKEN
    assert result.exit_code == 0, result.output
