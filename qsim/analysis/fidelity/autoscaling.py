"""Model beside engine for an autoscaled run: the workers over time, the p95 per window, a verdict.

:func:`autoscaling_agreement` reads two Summaries of the same scenario and
seed (``qsim compare``'s ``model`` and ``engine``) and, per autoscaled pool:

- ``workers_within``: the share of ``[0, duration]`` during which the replica
  counts the two controllers asked for differ by at most ``workers`` (1);
- ``windows_within``: the share of windows whose p95 wait agrees: within
  ``rel`` (25%) of the model's or ``abs`` (100 ms), whichever is looser, or
  inside the model's band for the window (given ``bands``: the 5-95% range of
  the window's p95 wait over replications with other seeds, which ``qsim
  compare`` runs; a window of a few hundred jobs is too noisy for 25% alone).
  A window in which neither started a job agrees; one side only does not;
- ``cut_jobs``, ``scale_events``, ``worker_seconds``: both sides';
- ``passed``: ``workers_within >= 0.9``, ``windows_within >= 0.85`` and no job
  lost on the engine (:data:`THRESHOLDS`).

``qsim compare`` adds it to its document as ``autoscaling`` and prints it
after the table (:func:`format_agreement`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["autoscaling_agreement", "asked_at", "format_agreement", "THRESHOLDS"]

#: Shares the verdict asks for: time with workers within 1, windows with p95 wait within tolerance.
THRESHOLDS = {"workers_within": 0.90, "windows_within": 0.85}


def asked_at(trajectory: Sequence[Sequence[float]], times: Sequence[float]) -> list[float]:
    """The replicas asked for at each of ``times`` (the last change at or before it)."""
    out = []
    i = 0
    for t in times:
        while i + 1 < len(trajectory) and trajectory[i + 1][0] <= t:
            i += 1
        out.append(float(trajectory[i][1]))
    return out


def _share_within(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], end: float, tol: float) -> float:
    """The share of ``[0, end]`` during which the two step functions differ by at most ``tol``."""
    cuts = sorted({0.0, end, *(float(r[0]) for r in a if 0 < r[0] < end), *(float(r[0]) for r in b if 0 < r[0] < end)})
    va, vb = asked_at(a, cuts), asked_at(b, cuts)
    good = sum(t1 - t0 for t0, t1, x, y in zip(cuts, cuts[1:], va, vb) if abs(x - y) <= tol + 1e-9)
    return good / end if end > 0 else 1.0


Band = tuple[float, float] | None


def _windows_within(model: Sequence[Mapping[str, Any]], engine: Sequence[Mapping[str, Any]], rel: float,
                    abs_s: float, bands: Sequence[Band]) -> tuple[float | None, int]:
    pairs = list(zip(model, engine))
    if not pairs:
        return None, 0
    good = 0
    for i, (m, e) in enumerate(pairs):
        x, y = m.get("wait_p95"), e.get("wait_p95")
        band = bands[i] if i < len(bands) else None
        if x is None or y is None:
            good += x is None and y is None
        else:
            good += (abs(float(y) - float(x)) <= max(rel * float(x), abs_s)
                     or (band is not None and band[0] <= float(y) <= band[1]))
    return good / len(pairs), len(pairs)


def autoscaling_agreement(model: Mapping[str, Any], engine: Mapping[str, Any], *, duration: float,
                          workers: float = 1.0, rel: float = 0.25, abs_s: float = 0.1,
                          bands: Sequence[Band] = (), replications: int = 0) -> dict[str, Any]:
    """Per autoscaled pool, how well the engine's run follows the model's (see the module docstring).

    ``bands``: per window, the model's 5-95% band of the p95 wait over ``replications`` runs with other
    seeds (:func:`qsim.results.windows.window_bands`); empty: each window is judged by the tolerance alone.
    """
    out: dict[str, Any] = {}
    ms, es = model.get("autoscaling") or {}, engine.get("autoscaling") or {}
    share, n = _windows_within(model.get("windows") or [], engine.get("windows") or [], rel, abs_s, bands)
    for pool in ms:
        if pool not in es:
            continue
        m, e = ms[pool], es[pool]
        within = _share_within(m["trajectory"], e["trajectory"], duration, workers)
        row = {"workers_within": within, "windows_within": share, "windows": n,
               "tolerance": {"workers": workers, "rel": rel, "abs": abs_s, "band_replications": replications},
               **{k: {"model": m[k], "engine": e[k]} for k in ("cut_jobs", "scale_events", "flaps", "worker_seconds")},
               "lost": engine["jobs"]["lost"]}
        row["passed"] = (within >= THRESHOLDS["workers_within"] and share is not None
                         and share >= THRESHOLDS["windows_within"] and row["lost"] == 0)
        out[pool] = row
    return out


def format_agreement(doc: Mapping[str, Any]) -> str:
    """The verdict lines of ``qsim compare`` for autoscaled pools."""
    lines = []
    for pool, a in doc.items():
        share = a["windows_within"]
        lines.append(f"autoscaler {pool}: workers within {a['tolerance']['workers']:g} for {a['workers_within']:.0%} "
                     f"of the time (>= {THRESHOLDS['workers_within']:.0%}); p95 wait within "
                     f"{a['tolerance']['rel']:.0%} or {a['tolerance']['abs'] * 1000:g} ms"
                     f"{_band_words(a['tolerance'].get('band_replications', 0))} in "
                     f"{'-' if share is None else f'{share:.0%}'} of {a['windows']} windows "
                     f"(>= {THRESHOLDS['windows_within']:.0%}); lost {a['lost']}: "
                     f"{'agrees' if a['passed'] else 'DOES NOT AGREE'}")
        lines.append(" " * 4 + "   ".join(f"{k.replace('_', ' ')} {_pair(a[k])}"
                                          for k in ("scale_events", "flaps", "cut_jobs", "worker_seconds")))
    return "\n".join(lines)


def _band_words(replications: int) -> str:
    return f" or inside the model's 5-95% band over {replications} seeds" if replications else ""


def _pair(x: Mapping[str, Any]) -> str:
    m, e = x["model"], x["engine"]
    fm = f"{m:.4g}" if isinstance(m, float) else str(m)
    fe = f"{e:.4g}" if isinstance(e, float) else str(e)
    return f"{fm} / {fe}"
