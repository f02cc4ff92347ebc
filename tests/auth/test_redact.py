"""``redact``: the one helper every message and log line prints a Redis URL through
(issue 24, finding 10)."""

from __future__ import annotations

import pytest

from controller.auth.redact import redact


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("redis://:s3cret@10.0.0.5:6380/1", "redis://:***@10.0.0.5:6380/1"),
        ("rediss://app:pw@db/0", "rediss://app:***@db/0"),
        ("redis://:pw@[::1]:6379/0", "redis://:***@[::1]:6379/0"),
        ("redis://only-a-user@db/0", "redis://***@db/0"),  # a lone user may be a password
        (
            "rediss://:pw@h:1/0?ssl_ca_certs=/etc/ca.pem&password=x",
            "rediss://:***@h:1/0?ssl_ca_certs=/etc/ca.pem&password=***",
        ),
        ("unix:///run/redis.sock?password=s3", "unix:///run/redis.sock?password=***"),
        ("redis://:pw@h:notaport/0", "redis://*** (unparsable URL, not shown)"),
    ],
)
def test_passwords_are_hidden_wherever_the_url_carries_them(url: str, shown: str) -> None:
    assert redact(url) == shown
