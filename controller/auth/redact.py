"""``redact``: a Redis URL fit for a message or a log line.

Every message that names a Redis URL goes through here: the URL carries the
password (``redis://:PASSWORD@host:port/db``, or ``?password=`` in its query),
and messages end up in terminals, logs and bug reports.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

HIDDEN: Final = "***"
_SECRET_PARAMETERS: Final = frozenset(
    {"password", "ssl_password", "ssl_keyfile_password", "sentinel_password"}
)


def redact(url: str) -> str:
    """``url`` with its password (in the authority or the query) replaced by ``***``.

    A URL that cannot be parsed is not printed at all beyond its scheme: whatever it
    holds may be a password.
    """
    if "," in url.split("?", 1)[0] or url.lower().startswith("redis+sentinel://"):
        return _redact_hosts(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        scheme = url.split("://", 1)[0] if "://" in url else "?"
        return f"{scheme}://{HIDDEN} (unparsable URL, not shown)"
    netloc = parts.netloc
    if parts.password is not None or "@" in netloc:
        user = parts.username or ""
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        credentials = f"{user}:{HIDDEN}" if parts.password is not None else HIDDEN
        netloc = f"{credentials}@{host}" + (f":{port}" if port is not None else "")
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key.lower() in _SECRET_PARAMETERS for key, _ in pairs):
            query = urlencode(
                [(k, HIDDEN if k.lower() in _SECRET_PARAMETERS else v) for k, v in pairs],
                safe="*/",
            )
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    # Built by hand: urlunsplit drops the "//" of a URL without a host (unix:///path).
    shown = (
        f"{parts.scheme}://{netloc}{parts.path}"
        if "://" in url
        else urlunsplit(parts._replace(netloc=netloc, query=""))
    )
    return shown + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")


def _redact_hosts(url: str) -> str:
    """A URL naming several hosts (``redis+sentinel://[user:pw@]h1:p1,h2:p2/name``), which
    ``urlsplit`` cannot read: the credentials before the last ``@`` and secret options go."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return f"?://{HIDDEN} (unparsable URL, not shown)"
    rest, _, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    credentials, at, hosts = authority.rpartition("@")
    if at:
        user = credentials.partition(":")[0] if ":" in credentials else ""
        authority = f"{user}:{HIDDEN}@{hosts}" if user else f"{HIDDEN}@{hosts}"
    shown = f"{scheme}://{authority}{slash}{path}"
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, HIDDEN if k.lower() in _SECRET_PARAMETERS else v) for k, v in pairs], safe="*/"
        )
        shown += f"?{query}"
    return shown
