"""The drift cases of calibrate's checks, shared by the model test (tests/unit/test_calibrate_drift.py) and
the engine test (tests/engine/test_calibrate_drift_engine.py): a step profile, a linear ramp, a stationary Poisson
stream and true batches in one scenario, and what recovering them means."""

from __future__ import annotations

from typing import Any

import numpy as np

from qsim.calibrate.arrivals import ArrivalFit
from qsim.spec import dists

#: 120 s at each rate: the fitted rate of a 10/s segment has a standard error under 3% (1,200 jobs), so
#: 10% is more than three of them (in a study of 150 seeds the largest error was 7.9%).
STEP = dists.RateProfile(points=((0.0, 10.0), (120.0, 40.0), (240.0, 10.0), (360.0, 10.0)), shape="step")
RAMP = dists.RateProfile(points=((0.0, 10.0), (360.0, 50.0)), shape="linear")
#: The issue's CSV case in the same run: a Poisson type that stops arriving (at 150 s).
STOPPED = dists.RateProfile(points=((0.0, 10.0), (150.0, 0.0), (360.0, 0.0)), shape="step")
SPAN = 360.0

#: The drift scenario: a step profile (10 -> 40 -> 10 jobs/s), a linear ramp (10 -> 50), a stationary
#: Poisson stream, true batches (20 jobs at once every 5 s) and a type that stops at 150 s, 360 s. The
#: engine check runs it too (tests/engine/test_calibrate_drift_engine.py).
DRIFT: dict[str, Any] = {
    "name": "drift", "seed": 11, "duration": SPAN, "queues": [{"name": "q"}],
    "jobs": [
        {"name": "step", "queue": "q", "arrival": {"kind": "profile", **STEP.as_table()},
         "service": {"kind": "constant", "mean": 0.002}},
        {"name": "ramp", "queue": "q", "arrival": {"kind": "profile", **RAMP.as_table()},
         "service": {"kind": "constant", "mean": 0.002}},
        {"name": "steady", "queue": "q", "arrival": {"kind": "poisson", "rate": 20.0},
         "service": {"kind": "constant", "mean": 0.002}},
        {"name": "batches", "queue": "q", "arrival": {"kind": "burst", "rate": 4.0, "size": 20},
         "service": {"kind": "constant", "mean": 0.002}},
        {"name": "stopped", "queue": "q", "arrival": {"kind": "profile", **STOPPED.as_table()},
         "service": {"kind": "constant", "mean": 0.002}},
    ],
    "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 16}],
}
#: Windows of this length (the Summary's default) are compared where the truth expects at least 200 jobs.
WINDOW = 60.0


def window_errors(fit: ArrivalFit, truth: dists.RateProfile, span: float, offset: float = 0.0) -> list[float]:
    """Relative error of the fitted rate against the truth per WINDOW-long window holding >= 200 jobs.

    ``offset``: where the truth's time 0 is on the fit's clock (the calibration window may start
    a little before the first arrival)."""
    prof = fit.profile
    assert prof is not None
    errors = []
    for a in np.arange(0.0, span - WINDOW / 2, WINDOW):
        b = min(a + WINDOW, span)
        want = truth.mean_between(a, b)
        if want * (b - a) >= 200:
            errors.append(abs(prof.mean_between(a + offset, b + offset) / want - 1))
    assert errors
    return errors


def check_recovery(fits: dict[str, ArrivalFit], span: float, offset: float = 0.0) -> dict[str, Any]:
    """The checks of the drift scenario on one calibration; returns the figures (for the report)."""
    step, ramp, steady, batches, stopped = (fits[t] for t in ("step", "ramp", "steady", "batches", "stopped"))
    assert step.kind == "profile" and step.profile is not None and step.profile.shape == "step", step.note
    assert ramp.kind == "profile" and ramp.profile is not None, ramp.note
    assert steady.kind == "poisson", steady.note
    assert batches.kind == "burst" and abs(batches.size - 20) <= 1 and batches.profile is None, batches.note
    assert stopped.kind == "profile" and stopped.profile is not None and stopped.drift is not None, stopped.note
    e_step, e_ramp = window_errors(step, STEP, span, offset), window_errors(ramp, RAMP, span, offset)
    e_stop = window_errors(stopped, STOPPED, span, offset)
    assert max(e_step) < 0.10, e_step
    assert max(e_ramp) < 0.10, e_ramp
    assert max(e_stop) < 0.10, e_stop
    assert step.drift is not None and len(step.drift.change_points) == 2
    assert all(abs(c - offset - t) < 1.0 for c, t in zip(step.drift.change_points, (120.0, 240.0))), step.drift
    (cp,) = stopped.drift.change_points
    assert abs(cp - offset - 150.0) < 1.0 and stopped.latest_rate == 0.0, stopped.drift
    return {t: {"kind": f.kind + (f" x{f.size}" if f.kind == "burst" else ""), "p_change": f.p_change,
                "model": f.drift.model if f.drift is not None else "",
                "change_points": [round(c - offset, 2) for c in f.drift.change_points] if f.drift else [],
                "max_window_error": max(window_errors(f, truth, span, offset)) if truth is not None else None}
            for t, f, truth in (("step", step, STEP), ("ramp", ramp, RAMP), ("steady", steady, None),
                                ("batches", batches, None), ("stopped", stopped, STOPPED))}
