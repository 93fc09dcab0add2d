"""``qsim compare --check``: is the engine's measurement within tolerance of the model's prediction?

Each checked quantity is a number of the Summary, by dotted path. It passes when

    |engine - model| <= max(rel * |model|, abs)

``rel`` is a fraction of the model's value; ``abs`` is a floor in the
quantity's own unit, so a tiny value (a p50 wait of 1 ms against 2 ms) is not
a 100% miss. The defaults (:data:`DEFAULT_TOLERANCES`):

========================================  ======  =======  =============================================
quantity                                   rel     abs      why
========================================  ======  =======  =============================================
``wait.p50``, ``wait.p95``                 10%     0.02 s   the floor: a few times the engine's per-job
``latency.p50``, ``latency.p95``                            overhead (pickup ~2-3 ms, ack ~4 ms here)
``throughput``                             3%      0        jobs/s over the measured window
``jobs.dead``                              exact            fixed by the draws (poison, failures, timeouts)
``jobs.lost``                              exact            must be 0: the engine's promise
``jobs.unfinished``                        exact            the engine drained every job it started
========================================  ======  =======  =============================================

``jobs.dead`` is *not fixed by the draws* when crashes can send jobs to the
dead-letter queue (a ``sigkill`` event and ``max_stalled`` smaller than the
number of kills): which jobs a crash catches is timing. It is then shown but
not checked (verdict ``skip``). ``jobs.lost`` must be 0 on the engine
whatever the model says.

A tolerance file (``--tolerance FILE``) is TOML, one table per quantity,
overriding the defaults or adding any other Summary number::

    ["wait.p95"]
    rel = 0.15          # fraction of the model's value
    abs = 0.05          # floor, in the quantity's unit (seconds for times)

    ["by_type.cut.latency.p95"]   # any Summary number by its dotted path
    rel = 0.10

    ["jobs.dead"]
    check = false       # show, do not check

Keys per table: ``rel`` (>= 0), ``abs`` (>= 0), ``check`` (true/false); a key
left out keeps the default's value (0 for a new quantity). A bad file is a
:class:`~qsim.errors.ToleranceError` naming the file and the key.

Per window (:mod:`qsim.analysis.fidelity.window_check`): a ``windows.FIELD`` quantity
(``windows.wait_p95``, ``windows.throughput``...) compares the runs window by
window and passes when at least ``share`` of them agree within ``rel``/``abs``
(key ``share``, 0..1, default 1). ``windows.wait_p95`` (20% or 0.05 s in 90%
of the windows) is checked by default when arrivals follow a rate profile.
When the model's windows carry bands over replications (``band_replications``
> 0, as ``qsim compare`` gives a profiled or autoscaled scenario), a window of
``windows.wait_p95`` or ``windows.mean_wait`` also agrees when the measured
value is inside the model's 5-95% band (the row's tolerance reads ``±20% or
0.05 s or in the band in 90% of windows``, its note how many were inside).
"""

from __future__ import annotations

import difflib
import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

from qsim.analysis.fidelity.window_check import WINDOW_QUANTITIES, WINDOW_TOLERANCES, window_agreement
from qsim.errors import ToleranceError
from qsim.results.windows import BAND_FIELDS
from qsim.results.summary import Summary, field_value
from qsim.spec.scenario import Scenario

__all__ = ["Tolerance", "Verdict", "DEFAULT_TOLERANCES", "load_tolerances", "check", "check_document", "judge_slos",
           "dead_fixed_by_draws", "summary_paths", "quantities_of", "unit_of"]


@dataclass(frozen=True)
class Tolerance:
    """``|engine - model| <= max(rel * |model|, abs)``; ``check=False``: shown, not checked; ``share``: for a
    ``windows.FIELD`` quantity, the least share of windows that must agree; ``band``: the replications
    behind the model's per-window bands a window may also fall in (0: none)."""

    rel: float = 0.0
    abs: float = 0.0
    check: bool = True
    share: float = 1.0
    band: int = 0

    def limit(self, model: float) -> float:
        """The largest difference allowed around the model's value ``model``."""
        return max(self.rel * abs(model), self.abs)

    def describe(self, unit: str = "") -> str:
        """``±10% or 0.02 s``, ``exact``, ``±3%``."""
        if not self.check:
            return "-"
        if self.rel == 0 and self.abs == 0:
            return "exact"
        rel = f"±{100 * self.rel:.3g}%" if self.rel else ""
        floor = f"{self.abs:.3g}{unit}" if self.abs else ""
        text = f"{rel} or {floor}" if rel and floor else rel or f"±{floor}"
        if self.band:
            text += " or in the band"
        return text if self.share >= 1.0 else f"{text} in {100 * self.share:.3g}% of windows"

#: What ``--check`` compares by default (see the module docstring).
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "wait.p50": Tolerance(0.10, 0.02),
    "wait.p95": Tolerance(0.10, 0.02),
    "latency.p50": Tolerance(0.10, 0.02),
    "latency.p95": Tolerance(0.10, 0.02),
    "throughput": Tolerance(0.03, 0.0),
    "jobs.dead": Tolerance(0.0, 0.0),
    "jobs.lost": Tolerance(0.0, 0.0),
    "jobs.unfinished": Tolerance(0.0, 0.0),
}
_TIMES = ("wait.", "latency.")


@dataclass(frozen=True)
class Verdict:
    """One row of the verdict table."""

    quantity: str
    model: float | None
    engine: float | None
    tolerance: Tolerance
    verdict: str  # pass | fail | skip
    note: str = ""
    windows: Mapping[str, Any] | None = None  # a windows.FIELD quantity: compared, agreeing, share, worst

    @property
    def ratio(self) -> float | None:
        """engine / model (None where the model's value is 0 or missing)."""
        if self.model is None or self.engine is None or self.model == 0:
            return None
        return self.engine / self.model

    def as_dict(self) -> dict[str, Any]:
        """The row as the ``check`` part of ``qsim compare --json`` writes it."""
        limit = self.tolerance.limit(self.model) if self.model is not None else None
        row: dict[str, Any] = {"quantity": self.quantity, "model": self.model, "engine": self.engine, "ratio": self.ratio,
                               "rel": self.tolerance.rel, "abs": self.tolerance.abs, "limit": limit,
                               "diff": None if self.model is None or self.engine is None else self.engine - self.model,
                               "verdict": self.verdict, "note": self.note}
        if self.windows is not None:
            row.update(share=self.tolerance.share, windows=dict(self.windows))
            if self.tolerance.band:
                row["band_replications"] = self.tolerance.band
        return row


def unit_of(quantity: str) -> str:
    """`` s`` for times, ``/s`` for throughput, else nothing."""
    if any(quantity.startswith(t) or f".{t}" in quantity for t in _TIMES) \
            or quantity.startswith(("windows.wait_", "windows.oldest_age")):
        return " s"
    return "/s" if quantity.endswith("throughput") else ""


def dead_fixed_by_draws(scenario: Scenario) -> bool:
    """Whether the draws fix which jobs end dead: no crash can stall a job past ``max_stalled``."""
    kills = sum(1 for e in scenario.events if e.kind == "sigkill")
    return kills == 0 or kills <= scenario.engine.max_stalled


def summary_paths(summary: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every dotted path to a number in ``summary`` (or to None: a statistic without data)."""
    out: list[str] = []
    for key, value in summary.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out += summary_paths(value, path + ".")
        elif value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append(path)
    return out


def quantities_of(scenario: Scenario) -> list[str]:
    """Every dotted path to a number in the Summary of ``scenario`` (its job types and queues), without a run."""
    names = {"by_type": [j.name for j in scenario.jobs], "by_queue": [q.name for q in scenario.queues]}

    def walk(hint: Any, prefix: str) -> list[str]:
        if is_typeddict(hint):
            return [p for key, h in get_type_hints(hint).items() for p in walk(h, f"{prefix}{key}.")]
        if get_origin(hint) is dict:
            field = prefix.rstrip(".")
            return [p for name in names.get(field, []) for p in walk(get_args(hint)[1], f"{prefix}{name}.")]
        kinds = set(get_args(hint)) or {hint}
        return [prefix.rstrip(".")] if kinds & {int, float} else []

    return walk(Summary, "")


def load_tolerances(path: str | Path, summary: Mapping[str, Any] | Iterable[str] | None = None) -> dict[str, Tolerance]:
    """The defaults with ``path``'s overrides. With ``summary`` (a Summary, or the quantities of one, see
    :func:`quantities_of`), every quantity named must be one of its numbers.

    Raises:
        ToleranceError: the file cannot be read, is not TOML, or has a bad key or value (named).
    """
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as e:
        raise ToleranceError(f"{path}: cannot read the tolerance file: {e.strerror or e}") from e
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ToleranceError(f"{path}: not valid TOML: {e}") from e
    out = dict(DEFAULT_TOLERANCES)
    known = (summary_paths(summary) if isinstance(summary, Mapping) else list(summary)) if summary is not None else None
    if known is not None:
        known += WINDOW_QUANTITIES  # compared window by window (qsim.analysis.fidelity.window_check)
    for quantity, table in raw.items():
        where = f'{path}: ["{quantity}"]'
        if known is not None and quantity not in known:
            hint = difflib.get_close_matches(quantity, known, n=1)
            also = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise ToleranceError(f"{where} is not a number of the Summary{also}")
        if not isinstance(table, Mapping):
            raise ToleranceError(f"{where} must be a table like {{rel = 0.1, abs = 0.02}}, got {table!r}")
        tol = out.get(quantity, Tolerance())
        for key, value in table.items():
            if key in ("rel", "abs"):
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                        or value < 0:
                    raise ToleranceError(f"{where}.{key} must be a number >= 0, got {value!r}")
                tol = replace(tol, rel=float(value)) if key == "rel" else replace(tol, abs=float(value))
            elif key == "check":
                if not isinstance(value, bool):
                    raise ToleranceError(f"{where}.check must be true or false, got {value!r}")
                tol = replace(tol, check=value)
            elif key == "share" and quantity.startswith("windows."):
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                    raise ToleranceError(f"{where}.share must be a fraction of the windows, above 0 and at most 1, "
                                         f"got {value!r}")
                tol = replace(tol, share=float(value))
            else:
                keys = ("rel", "abs", "check", "share") if quantity.startswith("windows.") else ("rel", "abs", "check")
                hint = difflib.get_close_matches(str(key), keys, n=1)
                also = f" (did you mean '{hint[0]}'?)" if hint else f" (known keys: {', '.join(keys)})"
                raise ToleranceError(f"{where}.{key} is not a known key{also}")
        out[quantity] = tol
    return out


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def check(model: Mapping[str, Any], engine: Mapping[str, Any], tolerances: Mapping[str, Tolerance] | None = None,
          *, scenario: Scenario | None = None, band_replications: int = 0) -> list[Verdict]:
    """The verdict of every quantity in ``tolerances`` (default :data:`DEFAULT_TOLERANCES`).

    With ``scenario``, ``jobs.dead`` is skipped where the draws do not fix it (:func:`dead_fixed_by_draws`).
    ``band_replications`` > 0: the model's windows carry ``bands`` over that many replications, and a
    window of a banded field inside its band agrees (:mod:`qsim.analysis.fidelity.window_check`).
    """
    tols = dict(DEFAULT_TOLERANCES if tolerances is None else tolerances)
    if scenario is not None:
        from qsim.analysis.plan.profile import time_varying

        if time_varying(scenario):
            for quantity, (rel, abs_, share) in WINDOW_TOLERANCES.items():
                tols.setdefault(quantity, Tolerance(rel, abs_, share=share))
    rows: list[Verdict] = []
    for quantity, tol in tols.items():
        if quantity.startswith("windows."):
            if band_replications and quantity.split(".", 1)[1] in BAND_FIELDS:
                tol = replace(tol, band=band_replications)
            rows.append(_window_verdict(model, engine, quantity, tol))
            continue
        m, e = _number(field_value(model, quantity)), _number(field_value(engine, quantity))
        note = ""
        if quantity == "jobs.lost":  # the engine's promise, whatever the model says
            m = 0.0 if m is None else m
            verdict = "pass" if e == 0 else "fail"
            note = "" if e == 0 else "the engine lost jobs"
        elif not tol.check:
            verdict = "skip"
        elif quantity == "jobs.dead" and scenario is not None and not dead_fixed_by_draws(scenario):
            verdict, note = "skip", "crashes decide which jobs die (sigkill, max_stalled)"
        elif m is None or e is None:
            verdict = "pass" if m is None and e is None else "fail"
            note = "no data on either side" if verdict == "pass" else "no data on one side"
        else:
            verdict = "pass" if abs(e - m) <= tol.limit(m) + 1e-12 else "fail"
        rows.append(Verdict(quantity, m, e, tol, verdict, note))
    return rows


def _window_verdict(model: Mapping[str, Any], engine: Mapping[str, Any], quantity: str, tol: Tolerance) -> Verdict:
    """A ``windows.FIELD`` row: pass when at least ``tol.share`` of the windows agree."""
    a = window_agreement(model, engine, quantity, rel=tol.rel, abs_=tol.abs, banded=tol.band > 0)
    if not tol.check:
        verdict = "skip"
    elif not a["compared"]:
        verdict = "pass" if not (model.get("windows") or engine.get("windows")) else "fail"
    else:
        verdict = "pass" if a["share"] >= tol.share - 1e-12 else "fail"
    note = (f"{a['agreeing']} of {a['compared']} windows agree" if a["compared"] else "no window to compare") + \
        (f", {a['inside_band']} inside the model's 5-95% band over {tol.band} seeds" if tol.band and a["compared"]
         else "") + ("" if a["worst"] is None else f"; worst: window {a['worst']}")
    return Verdict(quantity, None, None, tol, verdict, note, windows=a)


def judge_slos(slos: Sequence[Any], model: Mapping[str, Any], engine: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each SLO (:class:`qsim.analysis.slo.language.SLO`) judged on both runs: ``{"slo", "model", "engine",
    "model_met", "engine_met", "share"}`` (the values are the SLO's per-run value: a figure, the worst
    window's, or the share of windows meeting it; ``share`` is the share required, or None)."""
    return [{"slo": str(slo), "model": slo.measure(model), "engine": slo.measure(engine),
             "model_met": slo.met(model), "engine_met": slo.met(engine), "share": slo.share} for slo in slos]


def check_document(rows: Sequence[Verdict], slos: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The ``check`` part of ``qsim compare --json``: ``{"passed", "failed": [...], "quantities": [...]}``,
    and with SLOs (:func:`judge_slos`) ``"slo": [...]``: an SLO the engine misses fails the check too
    (``failed`` names it ``slo <text>``)."""
    failed = [r.quantity for r in rows if r.verdict == "fail"]
    failed += [f"slo {s['slo']}" for s in slos if not s["engine_met"]]
    doc: dict[str, Any] = {"passed": not failed, "failed": failed, "quantities": [r.as_dict() for r in rows]}
    if slos:
        doc["slo"] = [dict(s) for s in slos]
    return doc
