"""A redis:// URL on which nothing listens (for unreachable-Redis tests)."""

from __future__ import annotations

from redis_server import free_port


def unused_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"
