"""Guard rails for the load-generating tools (harness, Locust): local Redis only, unless confirmed.

The harness and the Locust users write thousands of jobs and may flush or
fill a queue; pointed at a production Redis by mistake they do real harm.
They call :func:`require_local_or_confirmed` with the Redis URL and the
value of their confirmation option (:data:`CONFIRM_OPTION`) before they
connect.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from qsim.errors import UsageError

__all__ = ["require_local_or_confirmed", "is_local_redis", "check_redis_url", "redis_reason", "unreachable",
           "display_url", "CONFIRM_OPTION"]

#: The command-line option that confirms a non-local Redis on purpose.
CONFIRM_OPTION = "--i-know-this-is-not-local"

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def display_url(url: str) -> str:
    """``url`` with its password replaced by ``***``, for messages and logs."""
    if not isinstance(url, str) or "://" not in url:
        return str(url)
    scheme, rest = url.split("://", 1)
    netloc, sep, tail = rest.partition("/")
    if "@" not in netloc:
        return url
    userinfo, host = netloc.rsplit("@", 1)
    shown = userinfo.split(":", 1)[0] + ":***" if ":" in userinfo else "***"
    return f"{scheme}://{shown}@{host}{sep}{tail}"



def redis_reason(error: BaseException) -> str:
    """The reason in a redis-py or socket error as a short clause: ``Error 111 connecting to
    127.0.0.1:1. Connection refused.`` -> ``connection refused``."""
    text = " ".join(str(error).split()).rstrip(".") or type(error).__name__
    last = text.rsplit(". ", 1)[-1]
    return last[:1].lower() + last[1:]


def unreachable(url: str, error: BaseException) -> str:
    """One sentence for a Redis that cannot be reached: ``cannot reach Redis at URL (reason)``."""
    return f"cannot reach Redis at {display_url(url)} ({redis_reason(error)})"


_SCHEMES = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")
_EXPECTED = "expected redis://HOST:PORT/DB, rediss://, unix:///PATH or redis+cluster://"


def check_redis_url(url: str) -> str:
    """``url`` when it is a usable Redis URL; raises :class:`~qsim.errors.UsageError` in one
    sentence naming it (password hidden) when it is not: another scheme, a port that is not a
    number from 0 to 65535, a database that is not a whole number, an option redis-py rejects."""
    from redis.connection import parse_url as redis_parse_url

    parse_url: Any = redis_parse_url  # untyped in redis-py
    if not isinstance(url, str) or "://" not in url:
        raise UsageError(f"not a Redis URL: {display_url(url)!r} ({_EXPECTED})")
    scheme = url.split("://", 1)[0].lower()
    if scheme not in _SCHEMES:
        raise UsageError(f"not a Redis URL: {display_url(url)!r} ({_EXPECTED})")
    plain = scheme.replace("+cluster", "") + url[len(scheme):]
    try:
        parts = urlsplit(plain)
        parse_url(plain)  # redis-py's own check: port, options
    except ValueError as e:
        raise UsageError(f"not a Redis URL: {display_url(url)!r} ({e})") from None
    db = parts.path.strip("/") if scheme != "unix" else ""
    if db and not db.isdigit():
        raise UsageError(f"not a Redis URL: {display_url(url)!r} (the database after the host must be a "
                         f"whole number such as /0, got /{db})")
    return url


def _host(url: str) -> tuple[str, str]:
    """(scheme, host) of a Redis URL; raises UsageError when it is not one."""
    check_redis_url(url)
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.hostname or ""


def is_local_redis(url: str) -> bool:
    """True for a unix socket or a loopback host (127.0.0.0/8, ::1, localhost)."""
    scheme, host = _host(url)
    if scheme == "unix":
        return True
    if not host:  # redis:// with no host means localhost to redis-py
        return True
    if host.lower().rstrip(".") in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a DNS name other than localhost: not provably local


def require_local_or_confirmed(url: str, confirmed: bool) -> None:
    """Refuse a non-local Redis unless the user confirmed it.

    Args:
        url: The Redis URL the tool is about to use.
        confirmed: Whether :data:`CONFIRM_OPTION` was given.

    Raises:
        UsageError: The URL is not a Redis URL, or its host is not loopback or a unix
            socket and ``confirmed`` is false; the message names the host and the option.
    """
    scheme, host = _host(url)
    if confirmed or is_local_redis(url):
        return
    raise UsageError(
        f"refusing to load-test the non-local Redis at {host!r} ({scheme}://): this writes many jobs "
        f"to it. Pass {CONFIRM_OPTION} if that is what you want."
    )
