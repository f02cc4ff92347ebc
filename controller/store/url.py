"""The store's URL: a Redis (``redis://``, ``rediss://``, ``unix://``) or a Sentinel-watched one.

Every process (the API, the controllers, ``flowlane up``) names its store with one URL,
so everything about the store is said once, in one place that can be kept out of ``ps``
(``$FLOWLANE_REDIS_URL`` or ``--redis-url-file``):

``redis://[[user]:password@]host[:port][/db][?option=value...]`` (and ``rediss://``,
``unix://``) is handed to redis-py as it always was.

``redis+sentinel://[[user]:password@]host1[:port1][,host2[:port2]...]/<master-name>[/<db>]``
``[?option=value...]`` names the Sentinels (port 26379 when left out) that watch the
primary called ``<master-name>``; the client asks them where the primary is and asks again
after a failover.  The credentials in front of the hosts are the *data nodes'* (primary and
replicas, ``requirepass``/ACL), as in ``redis://``; the Sentinels' own are the options
``sentinel_username`` and ``sentinel_password`` (absent: the Sentinels ask for none).
``password`` (and ``username``) may replace the credentials in front of the hosts.

Options flowlane reads, for every scheme:

- ``min_replicas`` (default 0): a write the API acknowledges must be on this many replicas
  (Redis ``WAIT``); 0 waits for none, as with the single embedded Redis.
- ``wait_ms`` (default 500): how long a write waits for those replicas before it is
  answered 503 (the write may then exist on the primary only).
- ``retry_s`` (default 10 with Sentinel; without it redis-py's default of a few quick
  retries): how long a command that meets a connection error or a demoted primary is
  retried (with backoff) before it fails: longer than the Sentinels' failover time, so a
  request in flight during a failover is answered by the new primary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qsl, unquote, urlencode

SENTINEL_SCHEME: Final = "redis+sentinel"
DIRECT_SCHEMES: Final = ("redis", "rediss", "unix")
SENTINEL_PORT: Final = 26379
DEFAULT_WAIT_MS: Final = 500
SENTINEL_RETRY_S: Final = 10.0
"""Above a Sentinel failover with ``down-after-milliseconds`` 5000 (the example's), with room."""

_FLOWLANE_OPTIONS: Final = ("min_replicas", "wait_ms", "retry_s")
_SENTINEL_OPTIONS: Final = ("sentinel_username", "sentinel_password", "username", "password")
FORMAT: Final = (
    "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/<master-name>[/<db>]"
    "[?min_replicas=N&wait_ms=MS&retry_s=S&sentinel_password=...]"
)


class StoreUrlError(ValueError):
    """A store URL that cannot be used; the message names the part that is wrong (never the
    password)."""


@dataclass(frozen=True, slots=True)
class Durability:
    """What a write the API acknowledges must have reached: ``min_replicas`` replicas within
    ``wait_ms`` (0 replicas: the primary's reply is enough)."""

    min_replicas: int = 0
    wait_ms: int = DEFAULT_WAIT_MS

    @property
    def waits(self) -> bool:
        return self.min_replicas > 0


@dataclass(frozen=True, slots=True)
class SentinelTarget:
    """Where the Sentinels are, which primary they watch, and the credentials of each side."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    """The data nodes' (primary and replicas)."""
    sentinel_username: str | None = None
    sentinel_password: str | None = None


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A parsed store URL: either ``direct`` (a URL for redis-py) or ``sentinel``."""

    direct: str | None
    """The URL without flowlane's options, for ``redis.Redis.from_url``; None with Sentinel."""
    sentinel: SentinelTarget | None
    durability: Durability = field(default_factory=Durability)
    retry_s: float | None = None
    """None: redis-py's default retries (direct URLs without ``retry_s``)."""


def _int_option(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise StoreUrlError(f"option {name}={value!r}: not a whole number") from None
    if number < minimum:
        raise StoreUrlError(f"option {name}={number}: must be at least {minimum}")
    return number


def _flowlane_options(options: dict[str, str], sentinel: bool) -> tuple[Durability, float | None]:
    min_replicas = _int_option("min_replicas", options.get("min_replicas", "0"), 0)
    wait_ms = _int_option("wait_ms", options.get("wait_ms", str(DEFAULT_WAIT_MS)), 1)
    retry_s: float | None = SENTINEL_RETRY_S if sentinel else None
    if "retry_s" in options:
        raw = options["retry_s"]
        try:
            retry_s = float(raw)
        except ValueError:
            raise StoreUrlError(f"option retry_s={raw!r}: not a number of seconds") from None
        if not 0 <= retry_s <= 3600:
            raise StoreUrlError(f"option retry_s={raw}: must be between 0 and 3600 seconds")
    return Durability(min_replicas, wait_ms), retry_s


def _query(query: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key in options:
            raise StoreUrlError(f"option {key} is given twice")
        options[key] = value
    return options


def parse_store_url(url: str) -> StoreUrl:
    """Parse and check ``url``; ``StoreUrlError`` says which part is wrong (and shows the
    URL without its passwords)."""
    try:
        return _parse(url)
    except StoreUrlError as exc:
        from controller.auth.redact import redact

        raise StoreUrlError(f"Redis URL {redact(url)}: {exc}") from None


def _parse(url: str) -> StoreUrl:
    scheme, sep, _ = url.partition("://")
    if not sep:
        raise StoreUrlError(
            "not a URL: expected redis://host:port/db, rediss://..., unix:///path or " + FORMAT
        )
    scheme = scheme.lower()
    if scheme == SENTINEL_SCHEME:
        return _parse_sentinel(url)
    if scheme not in DIRECT_SCHEMES:
        raise StoreUrlError(
            f"scheme {scheme}:// is not one of redis://, rediss://, unix://, {SENTINEL_SCHEME}://"
        )
    base, _, query = url.partition("?")
    options = _query(query)
    durability, retry_s = _flowlane_options(options, sentinel=False)
    # redis-py passes unknown query options on to its connections, which refuse them: ours go.
    direct = url
    if any(name in options for name in _FLOWLANE_OPTIONS):
        kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)]
        query = urlencode([(k, v) for k, v in kept if k not in _FLOWLANE_OPTIONS], safe="/*")
        direct = base + (f"?{query}" if query else "")
    return StoreUrl(direct, None, durability, retry_s)


def _sentinel_hosts(hosts: str) -> tuple[tuple[str, int], ...]:
    if not hosts:
        raise StoreUrlError(f"no Sentinel host: expected {FORMAT}")
    found: list[tuple[str, int]] = []
    for entry in hosts.split(","):
        if not entry:
            raise StoreUrlError(f"empty Sentinel host in {hosts!r} (a stray comma?)")
        if entry.startswith("["):  # [IPv6]:port
            host, bracket, rest = entry[1:].partition("]")
            if not bracket or (rest and not rest.startswith(":")):
                raise StoreUrlError(f"Sentinel {entry!r}: expected [address]:port")
            port_text = rest[1:] if rest else ""
        else:
            host, _, port_text = entry.partition(":")
            if ":" in port_text:
                raise StoreUrlError(f"Sentinel {entry!r}: write an IPv6 address as [address]:port")
        if not host:
            raise StoreUrlError(f"Sentinel {entry!r}: no host name")
        port = SENTINEL_PORT
        if port_text:
            if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
                raise StoreUrlError(f"Sentinel {entry!r}: port {port_text!r} is not 1-65535")
            port = int(port_text)
        found.append((host, port))
    if len(set(found)) != len(found):
        raise StoreUrlError(f"a Sentinel is named twice in {hosts!r}")
    return tuple(found)


def _parse_sentinel(url: str) -> StoreUrl:
    rest = url.split("://", 1)[1]
    authority, _, after = rest.partition("/")
    path, _, query = after.partition("?")
    if "#" in query or "#" in path:
        raise StoreUrlError("a fragment (#...) has no meaning in a store URL")
    credentials, at, hosts = authority.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = credentials.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = _sentinel_hosts(hosts)
    segments = path.split("/") if path else []
    if not segments or not segments[0]:
        raise StoreUrlError(f"no master name after the Sentinel hosts: expected {FORMAT}")
    if len(segments) > 2:
        raise StoreUrlError(
            f"path /{path}: expected /<master-name> or /<master-name>/<db>, nothing more"
        )
    master = unquote(segments[0])
    db = 0
    if len(segments) == 2:
        if not segments[1].isdigit():
            raise StoreUrlError(f"database {segments[1]!r} after /{master}: not a whole number")
        db = int(segments[1])
    options = _query(query)
    unknown = sorted(set(options) - set(_FLOWLANE_OPTIONS) - set(_SENTINEL_OPTIONS))
    if unknown:
        raise StoreUrlError(
            f"unknown option(s) {', '.join(unknown)}: a {SENTINEL_SCHEME} URL takes "
            + ", ".join((*_FLOWLANE_OPTIONS, *_SENTINEL_OPTIONS))
        )
    for key, given in (("password", password), ("username", username)):
        if key in options and given is not None and options[key] != given:
            raise StoreUrlError(f"two different {key}s: one before the hosts, one in ?{key}=")
    durability, retry_s = _flowlane_options(options, sentinel=True)
    target = SentinelTarget(
        sentinels,
        master,
        db,
        options.get("username", username) or None,
        options.get("password", password) or None,
        options.get("sentinel_username") or None,
        options.get("sentinel_password") or None,
    )
    return StoreUrl(None, target, durability, retry_s)
