"""Describing what went wrong with a job: a failed attempt's error text, a corrupt job hash's fields.

Used on the worker's failure path, which must never raise (a failure that is
not sent leaves its job to stall): :func:`describe` copes with exceptions
whose ``__str__`` or traceback break.
"""

from __future__ import annotations

import traceback

from qsim.engine.backoff import Backoff
from qsim.engine.protocol import Fetched

__all__ = ["describe", "corrupt_fields", "AttemptTimeout"]


class AttemptTimeout(TimeoutError):
    """Raised inside the worker when an attempt ran past its job's ``timeout``: the attempt is logged
    ``timeout`` (not ``failed``); its error text reads ``TimeoutError: attempt timed out after ...``."""


def corrupt_fields(f: Fetched) -> str:
    """Name the fields of a fetched job hash that cannot be read ("" if none is found)."""
    bad = []
    for name, conv in (("attempts_made", int), ("max_attempts", int), ("timeout", float)):
        value = getattr(f, name)
        try:
            conv(value or 0)
        except ValueError:
            bad.append(f"{name}={value[:40]!r}")
    if f.backoff:
        try:
            Backoff.from_json(f.backoff)
        except (ValueError, KeyError, TypeError) as e:
            bad.append(f"backoff={f.backoff[:40]!r} ({e})")
    return ", ".join(bad) + (" cannot be read" if bad else "")


def describe(e: BaseException) -> tuple[str, str]:
    """``"Type: message"`` and the traceback of ``e``, even when its ``__str__`` or traceback break."""
    try:
        text = str(e)
    except BaseException as x:  # noqa: BLE001 - an exception's __str__ may do anything
        text = f"<str() failed: {type(x).__name__}>"
    try:
        tb = "".join(traceback.format_exception(e))
    except BaseException as x:  # noqa: BLE001
        tb = f"<the traceback could not be formatted: {type(x).__name__}>"
    name = "TimeoutError" if isinstance(e, AttemptTimeout) else type(e).__name__
    return f"{name}: {text}", tb
