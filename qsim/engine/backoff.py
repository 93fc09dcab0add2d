"""Retry backoff: fixed or exponential delays with a cap and jitter."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """How long a failed job waits before its next attempt.

    Build one with :meth:`fixed` or :meth:`exponential`.

    Attributes:
        kind: ``"fixed"`` or ``"exponential"``.
        delay: Base delay in seconds.
        max: Cap on the delay in seconds (``None``: no cap).
        jitter: Fraction in [0, 1]: the delay is drawn uniformly from
            ``[d * (1 - jitter), d]``.
    """

    kind: str
    delay: float
    max: float | None = None
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("fixed", "exponential"):
            raise ValueError(f"backoff kind must be 'fixed' or 'exponential', got {self.kind!r}")
        if not isinstance(self.delay, (int, float)) or not self.delay >= 0:
            raise ValueError(f"backoff delay must be >= 0, got {self.delay!r}")
        if self.max is not None and not self.max >= 0:
            raise ValueError(f"backoff max must be >= 0, got {self.max!r}")
        if not 0.0 <= self.jitter <= 1.0:
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
        """Seconds to wait after the ``failed_attempts``-th failed attempt (1-based)."""
        n = max(1, int(failed_attempts))
        d = self.delay if self.kind == "fixed" else self.delay * 2.0 ** min(n - 1, 60)
        if self.max is not None:
            d = min(d, self.max)
        if self.jitter:
            d *= 1.0 - self.jitter * (rng or random).random()
        return d

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
