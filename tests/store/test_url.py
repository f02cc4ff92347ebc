"""The store URL: what each form means, and errors that name the wrong part (not the password)."""

from __future__ import annotations

import pytest

from controller.auth.redact import redact
from controller.store.url import (
    DEFAULT_WAIT_MS,
    SENTINEL_PORT,
    SENTINEL_RETRY_S,
    Durability,
    StoreUrlError,
    parse_store_url,
)


def test_a_plain_url_goes_to_redis_py_as_it_was() -> None:
    url = "redis://:pw@127.0.0.1:6379/2?socket_keepalive=true"
    parsed = parse_store_url(url)
    assert parsed.direct == url
    assert parsed.sentinel is None
    assert parsed.durability == Durability(0, DEFAULT_WAIT_MS)
    assert not parsed.durability.waits
    assert parsed.retry_s is None


@pytest.mark.parametrize(
    ("url", "direct"),
    [
        ("redis://h:1/0?min_replicas=1&wait_ms=250", "redis://h:1/0"),
        (
            "rediss://h:1/0?ssl_ca_certs=/ca.pem&min_replicas=1",
            "rediss://h:1/0?ssl_ca_certs=/ca.pem",
        ),
        ("unix:///run/redis.sock?db=3&retry_s=2", "unix:///run/redis.sock?db=3"),
    ],
)
def test_flowlanes_options_are_taken_off_a_plain_url(url: str, direct: str) -> None:
    parsed = parse_store_url(url)
    assert parsed.direct == direct


def test_a_sentinel_url_names_the_sentinels_the_master_the_db_and_both_passwords() -> None:
    parsed = parse_store_url(
        "redis+sentinel://app:data%40pw@10.0.0.1:26380,sentinel-b,[::1]:26382/flowlane/3"
        "?min_replicas=1&wait_ms=300&retry_s=4&sentinel_username=s&sentinel_password=sent"
    )
    target = parsed.sentinel
    assert target is not None and parsed.direct is None
    assert target.sentinels == (("10.0.0.1", 26380), ("sentinel-b", SENTINEL_PORT), ("::1", 26382))
    assert (target.master, target.db) == ("flowlane", 3)
    assert (target.username, target.password) == ("app", "data@pw")
    assert (target.sentinel_username, target.sentinel_password) == ("s", "sent")
    assert parsed.durability == Durability(1, 300) and parsed.durability.waits
    assert parsed.retry_s == 4.0


def test_a_sentinel_url_defaults() -> None:
    parsed = parse_store_url("redis+sentinel://h/mymaster")
    assert parsed.sentinel is not None
    assert parsed.sentinel.db == 0
    assert parsed.sentinel.password is None and parsed.sentinel.sentinel_password is None
    assert parsed.durability == Durability()
    assert parsed.retry_s == SENTINEL_RETRY_S


def test_the_data_password_may_be_an_option_instead() -> None:
    target = parse_store_url("redis+sentinel://h/m?password=pw").sentinel
    assert target is not None and target.password == "pw"
    assert parse_store_url("redis+sentinel://:pw@h/m?password=pw").sentinel == target


@pytest.mark.parametrize(
    ("url", "names"),
    [
        ("127.0.0.1:6379", "not a URL"),
        ("memcached://h", "scheme memcached://"),
        ("redis+sentinel:///m", "no Sentinel host"),
        ("redis+sentinel://h", "no master name"),
        ("redis+sentinel://h/", "no master name"),
        ("redis+sentinel://h:1,,h:2/m", "empty Sentinel host"),
        ("redis+sentinel://h:x/m", "Sentinel 'h:x': port 'x'"),
        ("redis+sentinel://h:70000/m", "port '70000'"),
        ("redis+sentinel://::1/m", "IPv6"),
        ("redis+sentinel://[::1/m", "[address]:port"),
        ("redis+sentinel://h:1,h:1/m", "named twice"),
        ("redis+sentinel://h/m/x", "database 'x'"),
        ("redis+sentinel://h/m/1/more", "nothing more"),
        ("redis+sentinel://h/m?socket_timeout=1", "unknown option(s) socket_timeout"),
        ("redis+sentinel://h/m?min_replicas=1&min_replicas=2", "min_replicas is given twice"),
        ("redis+sentinel://:a@h/m?password=b", "two different passwords"),
        ("redis://h?min_replicas=one", "min_replicas='one': not a whole number"),
        ("redis://h?min_replicas=-1", "min_replicas=-1: must be at least 0"),
        ("redis://h?wait_ms=0", "wait_ms=0: must be at least 1"),
        ("redis://h?retry_s=soon", "retry_s='soon'"),
        ("redis://h?retry_s=-1", "between 0 and 3600"),
    ],
)
def test_a_bad_url_is_refused_naming_the_wrong_part(url: str, names: str) -> None:
    with pytest.raises(StoreUrlError) as refused:
        parse_store_url(url)
    assert names in str(refused.value)


def test_an_error_never_shows_a_password() -> None:
    with pytest.raises(StoreUrlError) as refused:
        parse_store_url("redis+sentinel://:hunter2@h:1,h:x/m?sentinel_password=swordfish")
    message = str(refused.value)
    assert "hunter2" not in message and "swordfish" not in message
    assert "h:x" in message


def test_redact_hides_both_passwords_of_a_sentinel_url() -> None:
    shown = redact("redis+sentinel://app:hunter2@a:1,b:2/m/0?sentinel_password=swordfish&wait_ms=9")
    assert shown == "redis+sentinel://app:***@a:1,b:2/m/0?sentinel_password=***&wait_ms=9"
