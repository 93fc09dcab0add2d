"""Plots of autoscaled runs: workers and p95 wait over time, one panel per policy (or per source).

:func:`autoscaling_plot` reads Summaries (a run's ``autoscaling`` section and
its ``windows``): per panel, the workers asked for and the workers taking work
(steps, left axis) and each window's p95 wait (dots and line, right axis) with
the SLO's limit. A run without an autoscaler for the pool (a static sizing, a
run of the engine without one) shows its windows' ``workers`` figure instead.
Built without pyplot, as :mod:`qsim.analysis.plots`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

__all__ = ["autoscaling_plot"]


def _workers_of(summary: Mapping[str, Any], pool: str) -> tuple[list[float], list[float], list[float]]:
    scaled = (summary.get("autoscaling") or {}).get(pool)
    if scaled is not None:
        traj = scaled["trajectory"]
        t = [float(r[0]) for r in traj]
        return t, [float(r[1]) for r in traj], [float(r[2]) for r in traj]
    windows = summary.get("windows") or []
    t = [float(w["start"]) for w in windows]
    n = [float((w.get("workers") or {}).get(pool, 0.0)) for w in windows]
    return t, n, n


def autoscaling_plot(runs: Mapping[str, Mapping[str, Any]], pool: str, *, slo: float | None = None,
                     title: str = "", end: float | None = None, panel_height: float = 1.9) -> Figure:
    """Workers and p95 wait over time for each run of ``runs`` (label -> Summary), one panel each.

    Args:
        pool: the autoscaled pool.
        slo: the p95 wait limit to draw (seconds), if any.
        end: the last time shown (default: the runs' last window end).
        panel_height: inches per panel.
    """
    fig = Figure(figsize=(9, panel_height * max(1, len(runs)) + 0.6))
    axes = fig.subplots(max(1, len(runs)), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, summary) in zip(axes, runs.items()):
        t, asked, ready = _workers_of(summary, pool)
        windows = summary.get("windows") or []
        stop = end if end is not None else (float(windows[-1]["end"]) if windows else (t[-1] if t else 1.0))
        if t:
            ax.step(t + [stop], asked + asked[-1:], where="post", color="tab:blue", lw=1.4, label="workers asked")
            if ready != asked:
                ax.step(t + [stop], ready + ready[-1:], where="post", color="tab:blue", lw=0.9, ls="--",
                        label="taking work")
        ax.set_ylabel("workers", color="tab:blue")
        ax.set_ylim(bottom=0)
        ax.set_title(label, fontsize=9, loc="left")
        right = ax.twinx()
        mids = [(float(w["start"]) + float(w["end"])) / 2 for w in windows if w.get("wait_p95") is not None]
        p95 = [float(w["wait_p95"]) for w in windows if w.get("wait_p95") is not None]
        right.plot(mids, p95, ".-" if len(p95) <= 40 else "-", color="tab:red", ms=2, lw=0.7,
                   label="p95 wait per window")
        if slo is not None:
            right.axhline(slo, color="tab:red", ls=":", lw=1.0, label=f"SLO {slo:g} s")
        right.set_ylabel("p95 wait (s)", color="tab:red")
        right.set_ylim(bottom=0)
        if ax is axes[0]:
            lines = ax.get_legend_handles_labels()
            more = right.get_legend_handles_labels()
            ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper left", ncol=4)
    axes[-1].set_xlabel("time (s)")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
