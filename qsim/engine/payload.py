"""Job payloads: strict JSON encoding, size limits and redaction of secrets."""

from __future__ import annotations

import fnmatch
import functools
import json
import logging
from collections.abc import Iterable
from typing import Any

from qsim.errors import PayloadError
from qsim.spec.settings import DEFAULT_MAX_PAYLOAD  # a worker setting's default (max_payload)

__all__ = [
    "encode_payload",
    "decode_payload",
    "redact",
    "scrub_text",
    "normalize_fields",
    "is_sensitive",
    "DEFAULT_REDACT",
    "DEFAULT_MAX_PAYLOAD",
    "DEFAULT_WARN_PAYLOAD",
    "MAX_DEPTH",
    "REDACTED",
]

logger = logging.getLogger(__name__)

#: Sensitive field patterns hidden by default. A pattern matches a field name case-insensitively, as a
#: substring with "-", "_", "." and spaces ignored ("api_key" matches "X-Api-Key" and "apiKey", "token"
#: matches "access_token"); a pattern with "*", "?" or "[" is a glob on the whole lower-cased name.
DEFAULT_REDACT: tuple[str, ...] = ("password", "passwd", "secret", "token", "api_key", "authorization",
                                   "credential", "private_key", "cookie")
DEFAULT_WARN_PAYLOAD = 1024
REDACTED = "***"
#: Deepest nesting of lists/dicts a payload may have (deeper ones are refused, not crashed on).
MAX_DEPTH = 100

_SCALARS = (str, int, float, bool, type(None))


def _check(value: Any, path: str, depth: int = 1) -> None:
    """Refuse what JSON would silently change (non-str keys), cannot hold, or nests too deeply."""
    if isinstance(value, _SCALARS):
        return
    if depth > MAX_DEPTH and isinstance(value, (dict, list, tuple)):
        raise PayloadError(f"{path.split('[')[0].split('.')[0]} is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise PayloadError(f"{path}: dict keys must be str, got {type(k).__name__} {k!r}")
            _check(v, f"{path}.{k}", depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check(v, f"{path}[{i}]", depth + 1)
        return
    raise PayloadError(f"{path}: {type(value).__name__} is not JSON (only dict, list, str, int, float, bool, None)")


def encode_payload(
    value: Any,
    *,
    what: str = "data",
    max_bytes: int = DEFAULT_MAX_PAYLOAD,
    warn_bytes: int = DEFAULT_WARN_PAYLOAD,
) -> str:
    """Encode ``value`` as strict JSON, enforcing the size limits.

    Raises:
        PayloadError: ``value`` holds bytes, NaN/Infinity, objects or non-str
            keys, is nested more than :data:`MAX_DEPTH` levels deep, or encodes
            to more than ``max_bytes``.
    """
    if not isinstance(value, _SCALARS):
        _check(value, what)
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise PayloadError(f"{what} is not plain JSON: {e}") from e
    size = len(text)  # ensure_ascii: one byte per character
    if size > max_bytes:
        raise PayloadError(
            f"{what} is {size} bytes, over the {max_bytes}-byte limit: store large data elsewhere and enqueue its key"
        )
    if size > warn_bytes:
        logger.warning("%s is %s bytes (> %s): keep payloads small, enqueue ids", what, size, warn_bytes)
    return text


def decode_payload(text: str | None, *, what: str = "data") -> Any:
    """Decode stored JSON; corrupt text raises :class:`PayloadError`."""
    if text is None:
        raise PayloadError(f"{what} is missing")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise PayloadError(f"{what} is not valid JSON: {e}") from e


_SEPARATORS = str.maketrans("", "", "-_. ")
_GLOB = frozenset("*?[")


def normalize_fields(fields: Iterable[str]) -> frozenset[str]:
    """The sensitive field patterns (see :data:`DEFAULT_REDACT`), normalized; validates the input.

    Substring patterns are lower-cased without separators, glob patterns lower-cased.
    """
    if isinstance(fields, str):
        raise ValueError(f"redact must be a sequence of field names, got the string {fields!r}")
    out = set()
    for f in fields:
        if not isinstance(f, str) or not f or not f.translate(_SEPARATORS):
            raise ValueError(f"redact field names must be non-empty strings, got {f!r}")
        out.add(f.lower() if _GLOB & set(f) else f.lower().translate(_SEPARATORS))
    return frozenset(out)


@functools.lru_cache(maxsize=4096)
def is_sensitive(key: str, fields: frozenset[str]) -> bool:
    """Whether field name ``key`` matches one of the patterns ``fields`` (from :func:`normalize_fields`)."""
    low = key.lower()
    flat = low.translate(_SEPARATORS)
    return any(fnmatch.fnmatchcase(low, f) if _GLOB & set(f) else f in flat for f in fields)


def redact(value: Any, fields: frozenset[str]) -> Any:
    """A copy of ``value`` with the values of sensitive keys replaced by ``***``."""
    if not fields:
        return value
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(k, str) and is_sensitive(k, fields) else redact(v, fields))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, fields) for v in value]
    return value


def _secrets(value: Any, fields: frozenset[str], out: set[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and is_sensitive(k, fields) and v is not None:
                out.add(v if isinstance(v, str) else json.dumps(v))
            else:
                _secrets(v, fields, out)
    elif isinstance(value, list):
        for v in value:
            _secrets(v, fields, out)


def scrub_text(text: str, data: Any, fields: frozenset[str]) -> str:
    """``text`` with every sensitive value found in ``data`` replaced by ``***``."""
    if not fields or not text:
        return text
    found: set[str] = set()
    _secrets(data, fields, found)
    for s in sorted(found, key=len, reverse=True):
        if len(s) >= 3:
            text = text.replace(s, REDACTED)
    return text
