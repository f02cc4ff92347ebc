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
