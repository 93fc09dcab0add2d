"""How many examples a Hypothesis test draws: few in the default run, all of them in CI's long step.

Two profiles are registered by ``tests/conftest.py``: ``quick`` (the default: a property test draws a
tenth of its examples, at least 5, so the default run stays short) and ``thorough`` (every example the
test asks for; CI's long step runs the property tests again with ``--hypothesis-profile thorough``).
A test says how many examples it wants in full::

    @settings(max_examples=examples(300), deadline=None)
"""

from __future__ import annotations

from hypothesis import settings

__all__ = ["QUICK_SHARE", "examples", "register_profiles"]

#: The share of a property test's examples the default (``quick``) run draws.
QUICK_SHARE = 0.1


def register_profiles() -> None:
    """Register ``quick`` and ``thorough`` and load ``quick`` (``--hypothesis-profile`` overrides it)."""
    settings.register_profile("quick", max_examples=10, deadline=None)
    settings.register_profile("thorough", max_examples=100, deadline=None)
    settings.load_profile("quick")


def examples(full: int) -> int:
    """``full`` under the ``thorough`` profile, else a tenth of it (at least 5)."""
    if settings.get_current_profile_name() == "thorough":
        return full
    return max(5, round(full * QUICK_SHARE))
