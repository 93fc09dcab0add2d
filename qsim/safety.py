"""Guard rails for the load-generating tools (harness, Locust): local Redis only, unless confirmed.

The harness and the Locust users write thousands of jobs and may flush or
fill a queue; pointed at a production Redis by mistake they do real harm.
They call :func:`require_local_or_confirmed` with the Redis URL and the
value of their confirmation option (:data:`CONFIRM_OPTION`) before they
connect.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from qsim.errors import HarnessError

__all__ = ["require_local_or_confirmed", "is_local_redis", "display_url", "CONFIRM_OPTION"]

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



def _host(url: str) -> tuple[str, str]:
    """(scheme, host) of a Redis URL; raises HarnessError when it is not one."""
    if not isinstance(url, str) or "://" not in url:
        raise HarnessError(f"not a Redis URL: {display_url(url)!r} (expected redis://, rediss://, redis+cluster:// or unix://)")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError as e:
        raise HarnessError(f"not a Redis URL: {display_url(url)!r} ({e})") from e
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster"):
        raise HarnessError(f"not a Redis URL: {display_url(url)!r} (expected redis://, rediss://, redis+cluster:// or unix://)")
    return scheme, host


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
        HarnessError: The host is not loopback or a unix socket and
            ``confirmed`` is false; the message names the host and the option.
    """
    scheme, host = _host(url)
    if confirmed or is_local_redis(url):
        return
    raise HarnessError(
        f"refusing to load-test the non-local Redis at {host!r} ({scheme}://): this writes many jobs "
        f"to it. Pass {CONFIRM_OPTION} if that is what you want."
    )
