"""Token expiry (issue 24, finding 11): an expired token is purged, so its name can be
taken again, and the bootstrap admin can be given a lifetime too; with it, an expired
bootstrap admin is replaced by the next API start instead of locking the store."""

from __future__ import annotations

import pytest
import redis

from controller.auth.model import Role
from controller.store.tokens import BOOTSTRAP_NAME, TokenExistsError, TokenStore

NOW = 1_800_000_000.0


def test_an_expired_name_can_be_taken_again(redis_client: redis.Redis) -> None:
    """Before: 409 "a token named 'ci' exists" for as long as the dead record stayed."""
    tokens = TokenStore(redis_client)
    old, old_secret = tokens.create("ci", Role.operator, ttl_s=60, now=NOW)
    assert old.expires_at == NOW + 60
    fresh, fresh_secret = tokens.create("ci", Role.viewer, ttl_s=60, now=NOW + 61)
    assert fresh.role == "viewer"
    assert tokens.authenticate(old_secret, now=NOW + 62) is None  # the old hash went too
    found = tokens.authenticate(fresh_secret, now=NOW + 62)
    assert found is not None and found.name == "ci"


def test_a_live_name_stays_taken(redis_client: redis.Redis) -> None:
    tokens = TokenStore(redis_client)
    tokens.create("ci", Role.operator, ttl_s=60, now=NOW)
    with pytest.raises(TokenExistsError):
        tokens.create("ci", Role.operator, now=NOW + 59)


def test_expired_tokens_are_purged_by_use_and_by_listing(redis_client: redis.Redis) -> None:
    tokens = TokenStore(redis_client)
    _, short = tokens.create("short", Role.viewer, ttl_s=10, now=NOW)
    tokens.create("other-short", Role.viewer, ttl_s=10, now=NOW)
    tokens.create("forever", Role.viewer, now=NOW)
    assert tokens.authenticate(short, now=NOW + 11) is None
    assert set(redis_client.hkeys("flowlane:tokens")) == {"forever"}
    assert redis_client.hlen("flowlane:tokens:by-hash") == 1
    tokens.create("later", Role.viewer, ttl_s=5, now=NOW)
    assert [r.name for r in tokens.all(now=NOW + 6)] == ["forever"]
    assert tokens.purge_expired(now=NOW + 7) == []


def test_the_bootstrap_admin_gets_a_lifetime_and_is_replaced_once_expired(
    redis_client: redis.Redis,
) -> None:
    """Before: the bootstrap admin never expired, and an expired token blocked a new one."""
    tokens = TokenStore(redis_client)
    first = tokens.bootstrap(now=NOW, ttl_s=3600)
    assert first is not None
    (record,) = tokens.all(now=NOW)
    assert (record.name, record.expires_at) == (BOOTSTRAP_NAME, NOW + 3600)
    assert tokens.bootstrap(now=NOW + 100, ttl_s=3600) is None  # a live token: no new admin
    second = tokens.bootstrap(now=NOW + 3601, ttl_s=3600)
    assert second is not None and second != first
    assert tokens.authenticate(first, now=NOW + 3602) is None
    assert tokens.authenticate(second, now=NOW + 3602) is not None


def test_a_store_keeps_its_id(redis_client: redis.Redis) -> None:
    tokens = TokenStore(redis_client)
    first = tokens.store_id()
    assert len(first) == 8 and TokenStore(redis_client).store_id() == first
