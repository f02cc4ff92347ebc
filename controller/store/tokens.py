"""API tokens: stored only as hashes, with name, role, tenant, creation, expiry and last use.

Keys: ``<prefix>:tokens`` hash name → JSON record (with the SHA-256 of the
secret), ``<prefix>:tokens:by-hash`` hash secret-hash → name, so a request
is authenticated with one lookup and a revoked token is gone in one step.
Both change together in one Lua script: a name and its hash never disagree.

``last_used`` is written at most once a minute per token: a busy client must
not turn every read into a Redis write.

An expired token is purged: by the first request that carries it, by a
listing, and before a create or a bootstrap, so its name can be taken again
(an expired ``bootstrap-admin`` lets the next API start mint a new one).
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any, Final

import redis

from controller.auth.model import Principal, Role, new_secret, secret_hash
from controller.store.client import acknowledged, text, translate_errors

LAST_USED_RESOLUTION_S: Final = 60.0
BOOTSTRAP_NAME: Final = "bootstrap-admin"


@dataclass(frozen=True, slots=True)
class TokenRecord:
    name: str
    role: str
    tenant: str | None
    created_at: float
    expires_at: float | None
    last_used: float | None = None

    def principal(self) -> Principal:
        return Principal(self.name, Role.parse(self.role), self.tenant)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TokenExistsError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"a token named {name!r} exists; revoke it first")
        self.name = name


# Delete every expired token (record and hash). KEYS: tokens, by-hash. ARGV[4]: now.
# Returns the names purged. Shared by the scripts below as their first step.
_PURGE_BODY = """
local purged = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local record = cjson.decode(all[i + 1])
  local expires = record['expires_at']
  if type(expires) == 'number' and expires <= tonumber(ARGV[4]) then
    redis.call('HDEL', KEYS[2], record['hash'])
    redis.call('HDEL', KEYS[1], all[i])
    purged[#purged + 1] = all[i]
  end
end
"""
_PURGE = _PURGE_BODY + "return purged\n"

# Create a token unless a live token has its name (an expired one is purged first).
# KEYS: tokens, by-hash. ARGV: name, hash, record, now.
_CREATE = (
    _PURGE_BODY
    + """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
return 1
"""
)

# Revoke by name: the record and its hash go together. KEYS: tokens, by-hash. ARGV: name.
_REVOKE = """
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
redis.call('HDEL', KEYS[2], cjson.decode(raw)['hash'])
redis.call('HDEL', KEYS[1], ARGV[1])
return 1
"""

# Record a use, only over the record the caller read: a revoke or a re-create in between
# wins. KEYS: tokens. ARGV: name, record read, record with its last use.
_TOUCH = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 0
"""

# Create the bootstrap admin only while no live token exists. KEYS/ARGV as _CREATE.
_BOOTSTRAP = (
    _PURGE_BODY
    + """
if redis.call('HLEN', KEYS[1]) > 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
return 1
"""
)


class TokenStore:
    def __init__(self, client: redis.Redis, prefix: str = "flowlane") -> None:
        self._redis = client
        self._tokens = f"{prefix}:tokens"
        self._by_hash = f"{prefix}:tokens:by-hash"
        self._store_id = f"{prefix}:store-id"
        self._create = client.register_script(_CREATE)
        self._revoke = client.register_script(_REVOKE)
        self._bootstrap = client.register_script(_BOOTSTRAP)
        self._touch = client.register_script(_TOUCH)
        self._purge = client.register_script(_PURGE)

    @staticmethod
    def _encode(record: TokenRecord, digest: str) -> str:
        return json.dumps({**record.to_dict(), "hash": digest})

    @staticmethod
    def _decode(raw: bytes | str) -> tuple[TokenRecord, str | None]:
        """The record and the hash of its secret."""
        data = json.loads(text(raw))
        digest = data.pop("hash", None)
        return TokenRecord(**data), digest

    @translate_errors
    def create(
        self,
        name: str,
        role: Role,
        *,
        tenant: str | None = None,
        ttl_s: float | None = None,
        now: float | None = None,
    ) -> tuple[TokenRecord, str]:
        """A new token and its secret (shown once: only its hash is kept)."""
        created = now if now is not None else time.time()
        secret = new_secret()
        expires = created + ttl_s if ttl_s is not None else None
        record = TokenRecord(name, role.name, tenant, created, expires)
        digest = secret_hash(secret)
        keys = [self._tokens, self._by_hash]
        args = [name, digest, self._encode(record, digest), repr(created)]
        if not acknowledged(self._redis, self._create, keys, args):
            raise TokenExistsError(name)
        return record, secret

    @translate_errors
    def bootstrap(self, now: float | None = None, ttl_s: float | None = None) -> str | None:
        """The secret of a new admin token if the store has no live token, else None.

        ``ttl_s``: the token expires that long after its creation (None: never).
        """
        created = now if now is not None else time.time()
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"ttl_s must be positive, got {ttl_s}")
        secret = new_secret()
        expires = created + ttl_s if ttl_s is not None else None
        record = TokenRecord(BOOTSTRAP_NAME, Role.admin.name, None, created, expires)
        digest = secret_hash(secret)
        keys = [self._tokens, self._by_hash]
        args = [record.name, digest, self._encode(record, digest), repr(created)]
        if acknowledged(self._redis, self._bootstrap, keys, args):
            return secret
        return None

    @translate_errors
    def store_id(self) -> str:
        """A random id of this store, made by the first caller and kept: the token files of
        two stores (an ephemeral stack beside a persistent one) get different names."""
        self._redis.set(self._store_id, secrets.token_hex(4), nx=True)
        return text(self._redis.get(self._store_id) or "")

    @translate_errors
    def purge_expired(self, now: float | None = None) -> list[str]:
        """Delete every expired token; the names deleted."""
        moment = now if now is not None else time.time()
        purged = self._purge(keys=[self._tokens, self._by_hash], args=["", "", "", repr(moment)])
        return sorted(text(name) for name in purged)

    @translate_errors
    def revoke(self, name: str) -> bool:
        return bool(acknowledged(self._redis, self._revoke, [self._tokens, self._by_hash], [name]))

    @translate_errors
    def all(self, now: float | None = None) -> list[TokenRecord]:
        """The live tokens (the expired ones are purged first)."""
        self.purge_expired(now)
        records = [self._decode(raw)[0] for raw in self._redis.hgetall(self._tokens).values()]
        return sorted(records, key=lambda r: r.name)

    @translate_errors
    def authenticate(self, secret: str, now: float | None = None) -> TokenRecord | None:
        """The live token with this secret, or None (unknown, revoked or expired)."""
        moment = now if now is not None else time.time()
        digest = secret_hash(secret)
        name = self._redis.hget(self._by_hash, digest)
        if name is None:
            return None
        raw = self._redis.hget(self._tokens, text(name))
        if raw is None:
            return None
        record, stored_digest = self._decode(raw)
        if stored_digest != digest:
            return None
        if record.expired(moment):
            self.purge_expired(moment)  # its name is free again, and the list shows it gone
            return None
        if record.last_used is None or moment - record.last_used >= LAST_USED_RESOLUTION_S:
            used = dataclasses.replace(record, last_used=moment)
            self._touch(
                keys=[self._tokens], args=[record.name, text(raw), self._encode(used, digest)]
            )
            record = used
        return record
