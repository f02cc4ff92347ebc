"""Where the CLI's token and TLS files come from, and how a failed call is described.

Kept apart from the HTTP client so that the ``flowlane`` callback, which runs on
every call, imports neither httpx nor the command modules.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.auth.files import TOKEN_ENV, default_token_file, read_token_file
from controller.policy.errors import FieldError

EXIT_REJECTED = 1
EXIT_UNAVAILABLE = 3
EXIT_NOT_APPLIED = 4
EXIT_DENIED = 5


@dataclass
class Credentials:
    """Where the CLI's token comes from; set once by the ``flowlane`` callback."""

    token: str | None = None
    token_source: str = "--token"
    """Where ``token`` came from: ``--token``, or ``$FLOWLANE_TOKEN``, which the option reads."""
    token_file: Path | None = None
    ca_file: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    def verify(self) -> ssl.SSLContext | bool:
        """How to check an https:// API: the system's CAs, or ``ca_file``; with a client
        certificate when one is given."""
        if self.ca_file is None and self.client_cert is None:
            return True
        try:
            context = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
            if self.client_cert is not None and self.client_key is not None:
                context.load_cert_chain(self.client_cert, self.client_key)
        except (OSError, ssl.SSLError) as exc:
            raise ApiCallError(f"cannot load the TLS files: {exc}", EXIT_UNAVAILABLE) from None
        return context

    def resolve(self) -> str | None:
        return self.resolve_with_source()[0]

    def resolve_with_source(self) -> tuple[str | None, str | None]:
        """The token to send and where it came from (None, None: there is none), so a refused
        token can be traced to the setting that holds it."""
        if self.token:
            return self.token, self.token_source
        if os.environ.get(TOKEN_ENV):
            return os.environ[TOKEN_ENV], f"${TOKEN_ENV}"
        path = self.file()
        secret = read_token_file(path)
        return (secret, f"the token file {path}") if secret else (None, None)

    def file(self) -> Path:
        return self.token_file or default_token_file(os.environ, Path.home())


CREDENTIALS = Credentials()


@dataclass
class ApiCallError(Exception):
    """A request that did not succeed, described for an operator."""

    message: str
    exit_code: int = EXIT_REJECTED
    status: int | None = None
    body: Any = None
    errors: list[FieldError] = field(default_factory=list)

    def __str__(self) -> str:
        return self.message


REDIS_URL_ENV = "FLOWLANE_REDIS_URL"
REDIS_URL_FILE_ENV = "FLOWLANE_REDIS_URL_FILE"


def redis_url_warning(url: str | None, from_command_line: bool) -> str | None:
    """What to tell the operator when a Redis URL with a password was given as an argument
    (None: it was not). ``ps`` and ``/proc/PID/cmdline`` show arguments to every user."""
    if url is None or not from_command_line:
        return None
    from controller.auth.redact import redact

    if redact(url) == url:
        return None
    return (
        "warning: --redis-url carries a password on the command line, where ps shows it to"
        f" every user; put the URL in ${REDIS_URL_ENV} or in a file read with --redis-url-file"
    )


def redis_url_from_file(path: Path) -> str:
    """The Redis URL in ``path`` (one line; a file only its owner reads, like a token)."""
    try:
        url = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"--redis-url-file {path}: cannot read it: {reason}") from None
    if not url:
        raise ValueError(f"--redis-url-file {path}: empty, expected redis://[:password@]host")
    if "://" not in url:
        # The content is not quoted: it may be the password alone.
        raise ValueError(
            f"--redis-url-file {path}: not a URL (expected redis://[:password@]host:port/db)"
        )
    return url


def token_ttl_seconds(value: str | None, option: str = "--token-ttl") -> float | None:
    """``30d``, ``12h``... as seconds (None: the token never expires)."""
    if value is None:
        return None
    from controller.policy.units import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{option} {value!r}: {exc}") from None
    if seconds <= 0:
        raise ValueError(f"{option} {value!r}: must be positive")
    return seconds
