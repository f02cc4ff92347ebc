"""Files holding secrets, and where the first admin token is written and looked for.

The API writes the bootstrap token to a file only its owner can read (as
Jupyter and Vault's dev mode do) and prints the path; the CLI reads the same
default path, so ``make run`` then ``flowlane policy show`` needs no extra step.

Every secret the project writes (tokens, the private Redis's password, TLS
keys) goes through ``write_secret_file``: in a directory other users can
write to, a predictable temporary name lets one of them plant a file or a
symlink there first and read whatever is written into it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Final

TOKEN_ENV: Final = "FLOWLANE_TOKEN"
TOKEN_FILE_ENV: Final = "FLOWLANE_TOKEN_FILE"
SECRET_MODE: Final = 0o600
_CREATE_FLAGS: Final = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
)
_ATTEMPTS: Final = 16


def default_token_file(env: Mapping[str, str], home: Path) -> Path:
    """``$FLOWLANE_TOKEN_FILE``, else ``$XDG_CONFIG_HOME/flowlane/token`` (``~/.config``)."""
    if env.get(TOKEN_FILE_ENV):
        return Path(env[TOKEN_FILE_ENV])
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    return config / "flowlane" / "token"


def store_token_file(path: Path, store_id: str) -> Path:
    """Where the first token of store ``store_id`` goes when ``path`` holds another store's
    (``controller.api.bootstrap``): ``token.<store id>`` beside it."""
    return path.with_name(f"{path.name}.{store_id}")


def _create_temporary(path: Path) -> tuple[Path, int]:
    """A new file beside ``path`` under a random name, opened for writing, mode 0600.

    ``O_EXCL | O_NOFOLLOW``: a name someone else created first (a file or a symlink to
    one they can read) is never opened; another random name is tried instead.
    """
    for _ in range(_ATTEMPTS):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            return temporary, os.open(temporary, _CREATE_FLAGS, SECRET_MODE)
        except FileExistsError:
            continue
    raise FileExistsError(f"{path.parent}: {_ATTEMPTS} random temporary names were all taken")


def write_secret_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, readable by its owner only (0600, in a 0700 directory if
    new).

    Written to a random temporary name created with ``O_EXCL | O_NOFOLLOW`` and its final
    mode, then renamed: a reader never sees half a secret, the file is never readable by
    others, and a symlink planted at ``path`` is replaced, not followed.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary, fd = _create_temporary(path)
    try:
        try:
            os.fchmod(fd, SECRET_MODE)  # the umask may have taken bits off, never added any
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise


def write_token_file(path: Path, secret: str) -> None:
    """Write ``secret`` as a token file (see ``write_secret_file``)."""
    write_secret_file(path, (secret + "\n").encode())


def read_token_file(path: Path) -> str | None:
    """The token in ``path``; None when there is no such file."""
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        return None
    return secret or None
