"""Retry backoff: fixed or exponential delays with a cap and jitter (the rule itself is :mod:`qsim.spec.backoff`)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from qsim.spec.backoff import BACKOFF_KINDS, MAX_BACKOFF, backoff_delay

__all__ = ["Backoff", "MAX_BACKOFF"]


def _seconds(what: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_BACKOFF:
        raise ValueError(f"backoff {what} must be a number of seconds in [0, {MAX_BACKOFF:g}], got {v!r}")


@dataclass(frozen=True)
class Backoff:
    """How long a failed job waits before its next attempt.

    Build one with :meth:`fixed` or :meth:`exponential`.

    Attributes:
        kind: ``"fixed"`` or ``"exponential"``.
        delay: Base delay in seconds.
        max: Cap on the delay in seconds (``None``: :data:`MAX_BACKOFF`).
        jitter: Fraction in [0, 1]: the delay is drawn uniformly from
            ``[d * (1 - jitter), d]``.
    """

    kind: str
    delay: float
    max: float | None = None
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in BACKOFF_KINDS:
            raise ValueError(f"backoff kind must be 'fixed' or 'exponential', got {self.kind!r}")
        _seconds("delay", self.delay)
        if self.max is not None:
            _seconds("max", self.max)
        if isinstance(self.jitter, bool) or not isinstance(self.jitter, (int, float)) or not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"backoff jitter must be in [0, 1], got {self.jitter!r}")

    @classmethod
    def fixed(cls, delay: float, *, jitter: float = 0.0) -> Backoff:
        """The same ``delay`` seconds before every retry."""
        return cls("fixed", float(delay), None, float(jitter))

    @classmethod
    def exponential(cls, delay: float, *, max: float | None = None, jitter: float = 0.0) -> Backoff:  # noqa: A002
        """``delay * 2**(n-1)`` seconds before retry ``n``, capped at ``max``."""
        return cls("exponential", float(delay), None if max is None else float(max), float(jitter))

    def delay_for(self, failed_attempts: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after the ``failed_attempts``-th failed attempt (1-based); at most :data:`MAX_BACKOFF`."""
        u = (rng or random).random() if self.jitter else 0.0
        return backoff_delay(self.kind, self.delay, failed_attempts, cap=self.max, jitter=self.jitter, u=u)

    def delay_ms(self, failed_attempts: int, rng: random.Random | None = None) -> int:
        """:meth:`delay_for` in whole milliseconds, rounded down (what a failed attempt stores)."""
        return int(self.delay_for(failed_attempts, rng) * 1000)

    def to_json(self) -> str:
        """The compact JSON stored in the job hash."""
        return json.dumps({"kind": self.kind, "delay": self.delay, "max": self.max, "jitter": self.jitter})

    @classmethod
    def from_json(cls, text: str) -> Backoff | None:
        """Parse :meth:`to_json` output; ``""`` gives ``None``."""
        if not text:
            return None
        raw: dict[str, Any] = json.loads(text)
        return cls(str(raw["kind"]), float(raw["delay"]), raw.get("max"), float(raw.get("jitter") or 0.0))
