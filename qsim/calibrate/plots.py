"""Calibration plots: one figure per job type (matplotlib, no pyplot, like :mod:`qsim.analysis.plots`).

Left: the measured service CDF (the runs fitted, after the overhead shift)
against the chosen fit and the other candidates. Right: the measured
arrivals per minute over the window (bars; windows shorter than ten minutes
in 30 bins, longer ones in bins of a minute or more, at most 240 bins, still
shown per minute) against the fitted rate: one line for one rate, the rate
profile's curve (and its change points, dashed) when the rate changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from qsim.calibrate.service import ServiceFit, _frozen
from qsim.calibrate.typefit import TypeFit

__all__ = ["type_figure", "write_plots"]


def _service_axes(ax: Axes, s: ServiceFit) -> None:
    x = np.sort(s.sample)
    hi = float(np.percentile(x, 99.5)) if x.size else 1.0
    ax.step(x, np.arange(1, x.size + 1) / max(x.size, 1), where="post", color="black", linewidth=1.5,
            label=f"measured (n = {s.n})")
    grid = np.linspace(0.0, hi, 400)
    if s.kind != "empirical":
        ax.plot(grid, s.cdf(grid), linewidth=1.5, label=f"{s.kind} (KS {s.ks:.3g})" if not math.isnan(s.ks)
                else s.kind)
    for kind, v in s.candidates.items():
        if kind != s.kind:
            ax.plot(grid, _frozen(kind, v["mean"], v["cv"]).cdf(grid), linestyle=":", linewidth=1,
                    label=f"{kind} (KS {v['ks']:.3g})")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("service time (s)")
    ax.set_ylabel("fraction of runs")
    ax.set_title("service: measured vs fitted CDF")
    ax.legend(loc="lower right", fontsize="small")


def _arrival_axes(ax: Axes, f: TypeFit) -> None:
    a = f.arrival
    nbins = min(240, max(1, int(round(a.span / 60.0)))) if a.span >= 600 else 30
    width = a.span / nbins
    unit, label = (3600.0, "hours") if a.span >= 3 * 3600 else (60.0, "minutes")
    counts, edges = np.histogram(a.times, bins=nbins, range=(0.0, a.span))
    ax.bar(edges[:-1] / unit, counts * (60.0 / width), width=width / unit, align="edge", color="tab:blue",
           alpha=0.6, label=f"measured ({width:.3g} s bins)")
    profile = a.profile
    if profile is None:
        ax.axhline(a.rate * 60.0, color="tab:red", linewidth=1.5, label=f"fitted {a.kind}: {a.rate * 60:.4g}/min")
    else:
        grid = np.linspace(0.0, a.span, 2000)
        model = a.drift.model if a.drift is not None else profile.shape
        ax.plot(grid / unit, profile.rate_at(grid) * 60.0, color="tab:red", linewidth=1.5,
                label=f"fitted {a.kind} ({model}): mean {a.rate * 60:.4g}/min")
        for i, cp in enumerate(a.drift.change_points if a.drift is not None and model == "steps" else profile.jumps):
            ax.axvline(cp / unit, color="tab:red", linestyle="--", linewidth=0.8,
                       label="change points" if i == 0 else None)
    ax.set_xlabel(f"{label} into the window")
    ax.set_ylabel("arrivals per minute")
    ax.set_title("arrivals per minute: measured vs fitted rate")
    ax.legend(loc="lower right", fontsize="small")


def type_figure(f: TypeFit) -> Figure:
    """The calibration figure of one job type."""
    name = f.name
    fig = Figure(figsize=(11, 4))
    left, right = fig.subplots(1, 2)
    _service_axes(left, f.service)
    _arrival_axes(right, f)
    fig.suptitle(f"job type {name!r} ({f.jobs} jobs, queue {f.queue!r})")
    fig.tight_layout()
    return fig


def write_plots(types: Mapping[str, TypeFit], folder: Path) -> list[Path]:
    """Write ``<type>.png`` per job type (``{name: fit}``) into ``folder`` (which must exist); returns the paths."""
    paths = []
    for name, fit in types.items():
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
        path = folder / f"{safe}.png"
        type_figure(fit).savefig(path, dpi=80)
        paths.append(path)
    return paths
