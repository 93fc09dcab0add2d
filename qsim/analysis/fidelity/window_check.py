"""Model and engine window by window: does the engine follow the model through the profile?

A ``windows.FIELD`` quantity of ``qsim compare --check`` (``windows.wait_p95``,
``windows.throughput``, ...) compares the two runs' windows of the same index
(:mod:`qsim.results.windows`): a window *agrees* when ``|engine - model| <=
max(rel * |model|, abs)``, and the quantity passes when at least ``share`` of
the windows compared agree. Windows compared: those both runs have (the
engine's last completion may fall in a later window than the model's),
leaving out those where neither has a value (no job started); a value on one
side only disagrees. By default :data:`WINDOW_TOLERANCES` is checked when a
job type's arrivals follow a rate profile; a tolerance file can check any
window field of any scenario (``["windows.wait_p95"] rel = 0.2, abs = 0.05,
share = 0.9``).

With bands (the model's windows carry ``bands``: its 5-95% range over
replications with other seeds, :func:`qsim.results.windows.with_bands`, which
``qsim compare`` runs for a profiled or autoscaled scenario), a window of a
banded field (``wait_p95``, ``mean_wait``) also agrees when the engine's value
is inside the model's band: the band is how far the model's own window moves
from one seed to the next, so "the measured p95 is inside the band in 90% of
the windows" is what agreement can mean for a quantity this noisy. The
tolerance still lets a window agree where the band is narrow (a band of
``[0, 0]`` where no job waited, against a few milliseconds of the engine's
overhead).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from qsim.results.windows import BAND_FIELDS, WINDOW_FIELDS

__all__ = ["WINDOW_QUANTITIES", "WINDOW_TOLERANCES", "window_agreement"]

#: The per-window quantities a check can compare.
WINDOW_QUANTITIES = tuple(f"windows.{f}" for f in WINDOW_FIELDS if f not in ("start", "end", "workers"))
#: Checked by default on a profiled scenario: (rel, abs, share).
WINDOW_TOLERANCES: Mapping[str, tuple[float, float, float]] = {"windows.wait_p95": (0.20, 0.05, 0.90)}


def window_agreement(model: Mapping[str, Any], engine: Mapping[str, Any], quantity: str, *, rel: float,
                     abs_: float, banded: bool = False) -> dict[str, Any]:
    """``{"compared", "agreeing", "share", "worst"}`` of one ``windows.FIELD`` quantity (see the module docstring).

    ``worst`` is the window (index) with the largest difference over its allowed limit (and outside its
    band), or None. ``banded``: a window inside the model's band agrees too, and the result adds
    ``"inside_band"`` (how many of the compared windows have the engine's value inside the model's band)
    and ``"banded"`` (how many have a band).
    """
    field = quantity.split(".", 1)[1]
    banded = banded and field in BAND_FIELDS
    mw, ew = model.get("windows") or [], engine.get("windows") or []
    compared = agreeing = inside = with_band = 0
    worst, worst_excess = None, -math.inf
    for i, (m, e) in enumerate(zip(mw, ew)):
        a, b = m.get(field), e.get(field)
        if a is None and b is None:
            continue
        compared += 1
        band = (m.get("bands") or {}).get(field) if banded else None
        with_band += band is not None
        in_band = band is not None and b is not None and band[0] <= float(b) <= band[1]
        inside += in_band
        if in_band:
            excess = -math.inf
        elif a is None or b is None:
            excess = math.inf
        else:
            excess = abs(float(b) - float(a)) - max(rel * abs(float(a)), abs_)
        agreeing += excess <= 1e-12
        if excess > worst_excess:
            worst, worst_excess = i, excess
    out = {"compared": compared, "agreeing": agreeing,
           "share": agreeing / compared if compared else None, "worst": worst if worst_excess > 1e-12 else None}
    if banded:
        out.update(inside_band=inside, banded=with_band)
    return out
