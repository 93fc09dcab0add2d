"""qsim.engine.safety: the load tools refuse a non-local Redis unless confirmed."""

from __future__ import annotations

import pytest

from qsim.engine.safety import CONFIRM_OPTION, is_local_redis, require_local_or_confirmed
from qsim.errors import UsageError


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://127.8.9.10:7000",
        "redis://localhost:6379/1",
        "redis://LOCALHOST.:6379",
        "rediss://:pw@localhost:6380/0?ssl_ca_certs=/tmp/ca.pem",
        "redis://user:pw@[::1]:6379/0",
        "unix:///var/run/redis.sock?db=0",
        "redis://",
    ],
)
def test_local_urls_pass_without_confirmation(url: str) -> None:
    assert is_local_redis(url)
    require_local_or_confirmed(url, False)


@pytest.mark.parametrize(
    "url, host",
    [
        ("redis://10.0.0.5:6379/0", "10.0.0.5"),
        ("rediss://prod-cache.example.com:6380", "prod-cache.example.com"),
        ("redis://user:secret@[2001:db8::1]:6379", "2001:db8::1"),
        ("redis://localhost.evil.example:6379", "localhost.evil.example"),
        ("redis://0.0.0.0:6379", "0.0.0.0"),
    ],
)
def test_non_local_urls_are_refused_naming_host_and_option(url: str, host: str) -> None:
    assert not is_local_redis(url)
    with pytest.raises(UsageError) as e:
        require_local_or_confirmed(url, False)
    assert host in str(e.value) and CONFIRM_OPTION in str(e.value)
    assert "secret" not in str(e.value)
    require_local_or_confirmed(url, True)  # confirmed on purpose: allowed


@pytest.mark.parametrize("url", ["127.0.0.1:6379", "http://u:pw-9@127.0.0.1:6379", "", "redis://[::1"])
def test_not_a_redis_url_is_a_usage_error(url: str) -> None:
    with pytest.raises(UsageError, match="not a Redis URL") as e:
        require_local_or_confirmed(url, True)
    assert "pw-9" not in str(e.value)


def test_cluster_urls_are_judged_by_their_host() -> None:
    assert is_local_redis("redis+cluster://127.0.0.1:7000/0")
    assert not is_local_redis("rediss+cluster://10.0.0.1:7000")
