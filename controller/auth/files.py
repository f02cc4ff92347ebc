"""Token files: where the first admin token is written, and where the CLI looks for one.

The API writes the bootstrap token to a file only its owner can read (as
Jupyter and Vault's dev mode do) and prints the path; the CLI reads the same
default path, so ``make run`` then ``flowlane policy show`` needs no extra step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

TOKEN_ENV: Final = "FLOWLANE_TOKEN"
TOKEN_FILE_ENV: Final = "FLOWLANE_TOKEN_FILE"


def default_token_file(env: Mapping[str, str], home: Path) -> Path:
    """``$FLOWLANE_TOKEN_FILE``, else ``$XDG_CONFIG_HOME/flowlane/token`` (``~/.config``)."""
    if env.get(TOKEN_FILE_ENV):
        return Path(env[TOKEN_FILE_ENV])
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return config / "flowlane" / "token"


def write_token_file(path: Path, secret: str) -> None:
    """Write ``secret`` readable by its owner only (0600, in a 0700 directory if new).

    Written to a temporary name and renamed, so a reader never sees half a
    token, and created with its final mode, so it is never readable by others.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (secret + "\n").encode())
    finally:
        os.close(fd)
    temporary.replace(path)


def read_token_file(path: Path) -> str | None:
    """The token in ``path``; None when there is no such file."""
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        return None
    return secret or None
