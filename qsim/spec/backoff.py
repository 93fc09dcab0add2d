"""The retry backoff rule: how long a job waits after its n-th failed attempt.

Written once, here at the base, and used by the engine
(:meth:`qsim.engine.Backoff.delay_for`), the model (:mod:`qsim.model.retries`)
and the harness, so the three give the same delays attempt for attempt::

    fixed:        delay
    exponential:  delay * 2**(n - 1)
    then capped at ``cap`` (the backoff's ``max``; None: MAX_BACKOFF), then with ``jitter`` multiplied
    by ``1 - jitter * u`` for ``u`` uniform in [0, 1) (so uniform in [d (1 - jitter), d])

The engine stores delays in whole milliseconds, rounded down (:func:`backoff_ms`).
"""

from __future__ import annotations

__all__ = ["backoff_delay", "backoff_ms", "BACKOFF_KINDS", "MAX_BACKOFF"]

#: The kinds of backoff.
BACKOFF_KINDS = ("fixed", "exponential")

#: Longest delay (seconds) a backoff may give: 365 days. The engine refuses longer settings and
#: caps computed delays at it (an exponential backoff without ``max`` reaches it after ~25 retries).
MAX_BACKOFF = 365 * 86400.0


def backoff_delay(kind: str, delay: float, failed: int, *, cap: float | None = None, jitter: float = 0.0,
                  u: float = 0.0) -> float:
    """Seconds to wait after the ``failed``-th failed attempt (1-based; below 1 counts as 1).

    Args:
        kind: ``"fixed"`` or ``"exponential"`` (anything else is exponential).
        delay: Base delay in seconds.
        failed: Failed attempts so far.
        cap: The ``max`` of the backoff in seconds (None: :data:`MAX_BACKOFF`).
        jitter: Fraction in [0, 1] taken off at most.
        u: A uniform draw in [0, 1) (only used when ``jitter`` is set).
    """
    n = max(1, int(failed))
    d = delay if kind == "fixed" else delay * 2.0 ** min(n - 1, 60)
    d = min(d, MAX_BACKOFF if cap is None else cap)
    if jitter:
        d *= 1.0 - jitter * u
    return d


def backoff_ms(kind: str, delay: float, failed: int, *, cap: float | None = None, jitter: float = 0.0,
               u: float = 0.0) -> int:
    """:func:`backoff_delay` in whole milliseconds, rounded down, as the engine stores it."""
    return int(backoff_delay(kind, delay, failed, cap=cap, jitter=jitter, u=u) * 1000)
