"""Plots shared by the CLI and the notebooks (matplotlib, no global state).

Every function returns a :class:`matplotlib.figure.Figure` built without
pyplot (nothing global, safe in a process pool or a CLI); a notebook shows it
as the last expression of a cell, the CLI saves it with ``fig.savefig``.

- :func:`windows_plot` reads the Summary's ``windows`` of one run or several
  side by side (model beside engine): arrival rate and throughput, depth and
  p95 wait over time;
- :func:`queue_depth`, :func:`wait_distribution`, :func:`wait_over_time`,
  :func:`service_time_tail` and :func:`drain_times` read one run's records;
  :func:`starts_over_time` reads the attempts of one run or several side by side;
  :func:`quantile_comparison` draws the wait and latency quantiles of several
  runs (model and engine) side by side;
- :func:`sweep_metric` and :func:`model_vs_theory` read the points of
  :func:`~qsim.analysis.plan.sweep.sweep` or :func:`~qsim.analysis.plan.planner.plan`
  (``[{"params": {...}, "summary": Summary}]``); :func:`model_theory_table` is
  the table behind :func:`model_vs_theory`; :func:`plan_plot` draws a plan's
  points with their confidence intervals (``qsim plan --plot``);
  :func:`~qsim.analysis.autoscaling.plots.autoscaling_plot` draws autoscaled runs' workers and p95 wait over time.

:func:`set_notebook_dpi` is the one function that changes global state (matplotlib's
``figure.dpi``), on request: notebooks call it once so their committed PNGs stay small.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from qsim.analysis.autoscaling.plots import autoscaling_plot
from qsim.analysis.plan.sweep import with_params
from qsim.analysis.slo.language import SLO, parse_slo
from qsim.analysis.theory import predict
from qsim.errors import TheoryNotApplicable
from qsim.spec.scenario import Scenario

__all__ = ["windows_plot", "queue_depth", "wait_distribution", "wait_over_time", "service_time_tail", "drain_times",
           "starts_over_time", "quantile_comparison", "sweep_metric", "model_theory_table", "model_vs_theory", "plan_plot",
           "autoscaling_plot",
           "NOTEBOOK_DPI", "set_notebook_dpi"]

Point = Mapping[str, Any]
_METRIC = re.compile(r"^\s*(?P<metric>[a-z0-9_]+)(?:\[(?P<type>[^\]]+)\])?\s*$")

#: Dots per inch of notebook figures: a 9 x 4 in figure is a 720 x 320 px PNG of a few tens of KB.
NOTEBOOK_DPI = 80


def set_notebook_dpi(dpi: float = NOTEBOOK_DPI) -> None:
    """Draw the figures made from now on at ``dpi`` dots per inch (matplotlib's ``figure.dpi``).

    Notebooks call it once in their first cell, so the PNGs committed with their
    outputs stay small; an inline figure is saved at its own dpi.
    """
    if not dpi > 0:
        raise ValueError(f"dpi must be > 0, got {dpi}")
    matplotlib.rcParams["figure.dpi"] = dpi


def windows_plot(summaries: Mapping[str, Mapping[str, Any]] | Mapping[str, Any], *,
                 slo: SLO | str | None = None, title: str | None = None) -> Figure:
    """Per-window figures over time: arrival rate and throughput, max depth, p95 wait.

    Args:
        summaries: one Summary, or several by label (``{"model": ..., "engine": ...}``): one line each.
        slo: an SLO on ``p95_wait`` (``"p95_wait<=2 in 95% of windows"``) drawn as a line on the wait panel.
        title: the figure's title (default: the scenario's name).

    Each point is a window, drawn at its middle; a window where no job started has no p95 wait (a gap).
    Windows with ``bands`` (over replications) show the p95's 5-95% band as a shaded area.
    """
    runs = {str(summaries.get("source", "run")): summaries} if "windows" in summaries else dict(summaries)
    fig = Figure(figsize=(9, 7))
    rate_ax, depth_ax, wait_ax = fig.subplots(3, 1, sharex=True)
    for label, summary in runs.items():
        wins = list(summary.get("windows") or [])
        if not wins:
            continue
        mid = np.array([(w["start"] + w["end"]) / 2 for w in wins])
        length = np.array([w["end"] - w["start"] for w in wins])
        line: Any = rate_ax.plot(mid, np.array([w["arrivals"] for w in wins]) / length, label=f"{label} arrivals/s")[0]
        color = line.get_color()
        rate_ax.plot(mid, [w["throughput"] for w in wins], linestyle="--", color=color, label=f"{label} throughput")
        depth_ax.plot(mid, [w["max_depth"] for w in wins], color=color, label=f"{label} max depth")
        p95 = [np.nan if w["wait_p95"] is None else w["wait_p95"] for w in wins]
        wait_ax.plot(mid, p95, marker=".", color=color, label=f"{label} p95 wait")
        if any("bands" in w for w in wins):  # qsim simulate --replications, qsim compare: the 5-95% band
            lo, hi = ([np.nan if (b := (w.get("bands") or {}).get("wait_p95")) is None else b[k] for w in wins]
                      for k in (0, 1))
            wait_ax.fill_between(mid, lo, hi, color=color, alpha=0.2, linewidth=0, label=f"{label} p95 5-95% band")
    goal = parse_slo(slo) if isinstance(slo, str) else slo
    if goal is not None and goal.metric == "p95_wait":
        wait_ax.axhline(goal.value, color="red", linestyle=":", linewidth=1, label=f"SLO {goal}")
    rate_ax.set_ylabel("jobs/s")
    depth_ax.set_ylabel("jobs waiting")
    wait_ax.set_ylabel("p95 wait (s)")
    wait_ax.set_xlabel("time (s)")
    for ax in (rate_ax, depth_ax, wait_ax):
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize="small")
    first: Mapping[str, Any] = next(iter(runs.values()), {})
    wins = first.get("windows") or []
    length_text = f", {wins[0]['end'] - wins[0]['start']:g} s windows" if wins else ""
    rate_ax.set_title(title or f"{first.get('scenario', '')}: per window{length_text}")
    fig.tight_layout()
    return fig


def queue_depth(timeseries: pd.DataFrame, *, title: str = "Queue depth") -> Figure:
    """Waiting and active jobs per queue over time (columns time, queue, waiting, active)."""
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    for queue, ts in timeseries.groupby("queue", sort=True):
        ax.step(ts["time"], ts["waiting"], where="post", label=f"{queue} waiting")
        ax.step(ts["time"], ts["active"], where="post", linestyle=":", label=f"{queue} active")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("jobs")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig


def wait_distribution(jobs: pd.DataFrame, *, warmup: float = 0.0, title: str = "Wait time by job type") -> Figure:
    """Empirical CDF of the wait (enqueue -> first start) per job type, with p95 marked."""
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    measured = jobs[(jobs["enqueued"] >= warmup) & jobs["started"].notna()]
    for name, group in measured.groupby("type", sort=True):
        wait = np.sort((group["started"] - group["enqueued"]).to_numpy(float))
        if wait.size == 0:
            continue
        cdf = np.arange(1, wait.size + 1) / wait.size
        line: Any = ax.step(wait, cdf, where="post", label=f"{name} (p95 {np.percentile(wait, 95):.3g} s)")[0]
        ax.axvline(np.percentile(wait, 95), color=line.get_color(), linestyle=":", linewidth=0.8)
    ax.set_xlabel("wait (s)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.01)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


def quantile_comparison(runs: Mapping[str, pd.DataFrame], *, warmup: float = 0.0,
                        levels: Sequence[float] = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99),
                        reference: str | None = None, title: str = "Wait and latency quantiles") -> Figure:
    """The wait (enqueue -> first start) and latency (enqueue -> success) quantiles of several runs.

    ``runs`` maps a label (``model``, ``engine``...) to a run's jobs; jobs
    enqueued before ``warmup`` are left out, as in the Summary. Two panels,
    quantile level on x; seconds on y (log), or with ``reference`` (one of the
    labels) each run's quantile minus the reference's, in milliseconds: how far
    the runs disagree at each quantile.
    """
    if not levels or not all(0.0 < q < 1.0 for q in levels):
        raise ValueError(f"levels must be in (0, 1), got {list(levels)}")
    if reference is not None and reference not in runs:
        raise ValueError(f"reference must be one of {list(runs)}, got {reference!r}")
    qs = np.asarray(sorted(levels))
    curves: dict[str, dict[str, np.ndarray]] = {}
    for label, jobs in runs.items():
        kept = jobs[jobs["enqueued"] >= warmup]
        done = kept[kept["outcome"] == "completed"]
        values = {"wait": (kept["started"] - kept["enqueued"]).dropna().to_numpy(float),
                  "latency": (done["finished"] - done["enqueued"]).to_numpy(float)}
        curves[label] = {what: np.quantile(x, qs) if x.size else np.full(qs.size, np.nan) for what, x in values.items()}
    fig = Figure(figsize=(9, 3.6))
    axes = fig.subplots(1, 2)
    for ax, what in zip(axes, ("wait", "latency")):
        for label, curve in curves.items():
            if reference is None:
                ax.plot(100 * qs, curve[what], marker="o", markersize=3, label=label)
            elif label != reference:
                ax.plot(100 * qs, 1e3 * (curve[what] - curves[reference][what]), marker="o", markersize=3,
                        label=label)
        if reference is None:
            ax.set_yscale("symlog", linthresh=1e-3)
            ax.set_ylabel(f"{what} (s)")
        else:
            ax.axhline(0.0, color="grey", linewidth=0.8, label=reference)
            ax.set_ylabel(f"{what} minus {reference}'s (ms)")
        ax.set_xlabel("quantile (%)")
        ax.set_title(what)
        ax.legend(loc="best", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def wait_over_time(jobs: pd.DataFrame, *, bins: int = 30, quantile: float = 0.95,
                   title: str = "Wait by enqueue time") -> Figure:
    """Mean and ``quantile`` of the wait per job type, in ``bins`` windows of enqueue time.

    A wait that climbs from window to window is a backlog that grows for as
    long as the load lasts (starvation); a flat one is bounded. Jobs that never
    started are left out.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    started = jobs[jobs["started"].notna()]
    if len(started):
        edges = np.linspace(float(started["enqueued"].min()), float(started["enqueued"].max()), bins + 1)
        mids = (edges[:-1] + edges[1:]) / 2
        for name, group in started.groupby("type", sort=True):
            wait = (group["started"] - group["enqueued"]).to_numpy(float)
            which = np.clip(np.searchsorted(edges, group["enqueued"].to_numpy(float), side="right") - 1, 0, bins - 1)
            mean = np.full(bins, np.nan)
            tail = np.full(bins, np.nan)
            for b in np.unique(which):
                mean[b] = wait[which == b].mean()
                tail[b] = np.quantile(wait[which == b], quantile)
            line: Any = ax.plot(mids, mean, marker=".", label=f"{name} mean")[0]
            ax.plot(mids, tail, linestyle="--", color=line.get_color(), label=f"{name} p{quantile * 100:g}")
    ax.set_xlabel("enqueued at (s)")
    ax.set_ylabel("wait (s)")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return fig


def service_time_tail(jobs: pd.DataFrame, *, quantile: float = 0.999, grace: float | None = None,
                      title: str = "Service time tail by job type") -> Figure:
    """Survival function ``P(T >= t)`` of each type's run time (start -> finish), log scale.

    Marks each type's ``quantile`` and, when given, the ``grace`` period: a
    job running when SIGTERM arrives is cut off if it needs longer than that.
    Only jobs that finished are counted.
    """
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    done = jobs[jobs["started"].notna() & jobs["finished"].notna()]
    for name, group in done.groupby("type", sort=True):
        t = np.sort((group["finished"] - group["started"]).to_numpy(float))
        if t.size == 0:
            continue
        sf = (t.size - np.arange(t.size)) / t.size  # P(T >= t): no zero, so the longest job shows on a log axis
        q = float(np.quantile(t, quantile))
        line: Any = ax.step(t, sf, where="post", label=f"{name} (p{quantile * 100:g} {q:.3g} s, n={t.size})")[0]
        ax.axvline(q, color=line.get_color(), linestyle=":", linewidth=0.8)
    if grace is not None:
        ax.axvline(grace, color="black", linewidth=1.2, label=f"grace {grace:g} s")
    ax.set_yscale("log")
    ax.set_xlabel("run time (s)")
    ax.set_ylabel("P(run time >= t)")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig


def drain_times(drains: pd.DataFrame, *, grace: Sequence[float] = (), quantile: float = 0.999,
                title: str = "Graceful shutdown: time to drain") -> Figure:
    """Survival function of the time from SIGTERM to drained, one curve per pool, log scale.

    ``drains`` is the model's ``records.extra["drains"]`` (``pool``,
    ``signalled_at``, ``drained_at``, ``cut_off_at``, ...). A process that was
    cut off counts with its time to the cut-off (at least that long). Each
    value in ``grace`` gets a vertical line labelled with the share of
    shutdowns that took longer: the share that grace period would cut off.
    """
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    several = drains["pool"].nunique() > 1
    for pool, group in drains.groupby("pool", sort=True):
        end = group["drained_at"].fillna(group["cut_off_at"])
        t = np.sort((end - group["signalled_at"]).to_numpy(float))
        if t.size == 0:
            continue
        cut = int(group["drained_at"].isna().sum())
        sf = (t.size - np.arange(t.size)) / t.size  # P(D >= t), as in service_time_tail
        q = float(np.quantile(t, quantile))
        note = f", {cut} cut off" if cut else ""
        line: Any = ax.step(t, sf, where="post", label=f"{pool}: p{quantile * 100:g} {q:.3g} s (n={t.size}{note})")[0]
        ax.axvline(q, color=line.get_color(), linestyle=":", linewidth=0.8)
        of = f" ({pool})" if several else ""
        for g in grace:
            longer = float((t > g).mean())
            ax.axvline(g, color="black", linestyle="--", linewidth=1,
                       label=f"grace {g:g} s: {longer:.2%} of shutdowns longer{of}")
    ax.set_yscale("log")
    ax.set_xlabel("seconds from SIGTERM to drained")
    ax.set_ylabel("P(drain >= t)")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig


def starts_over_time(attempts: pd.DataFrame | Mapping[str, pd.DataFrame], *, width: float = 1.0,
                     until: float | None = None, title: str = "Attempts started per second") -> Figure:
    """Attempts started per second in windows of ``width`` s: first attempts and retries, stacked.

    ``attempts`` is one run's ``records.attempts`` (columns ``attempt``, ``start``),
    or a mapping of labels to such tables: one panel per run, on shared axes, to
    compare runs. Retries that come back together show as spikes (a thundering
    herd), spread ones as a low band. Each panel's legend gives its peak retry
    rate. ``until`` ends the time axis (default: the last start).
    """
    if not width > 0:
        raise ValueError(f"width must be > 0, got {width}")
    runs = {"": attempts} if isinstance(attempts, pd.DataFrame) else dict(attempts)
    if not runs:
        raise ValueError("attempts must be a table or a non-empty mapping of tables")
    if until is None:
        last = max((float(a["start"].max()) for a in runs.values() if len(a)), default=0.0)
        bins = int(last // width) + 1
    else:
        bins = max(1, math.ceil(until / width))
    edges = np.arange(bins + 1) * width
    fig = Figure(figsize=(9, 1.2 + 2.0 * len(runs)))
    axes = fig.subplots(len(runs), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, (label, frame) in zip(axes, runs.items()):
        start = frame["start"].to_numpy(float)
        retry = frame["attempt"].to_numpy() > 1
        first = np.histogram(start[~retry], bins=edges)[0] / width
        both = first + np.histogram(start[retry], bins=edges)[0] / width
        peak = float((both - first).max())
        ax.stairs(first, edges, fill=True, alpha=0.6, label="first attempts")
        ax.stairs(both, edges, baseline=first, fill=True, alpha=0.8, label=f"retries (peak {peak:.0f}/s)")
        ax.set_ylabel("starts/s")
        ax.set_title(label, fontsize="medium", loc="left")
        ax.legend(loc="upper right", fontsize="small")
    axes[-1].set_xlabel(f"time (s), windows of {width:g} s")
    axes[-1].set_xlim(0, edges[-1])
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _metric(metric: str) -> SLO:
    m = _METRIC.match(metric)
    if not m:
        raise ValueError(f"metric must look like p95_wait or p95_wait[type], got {metric!r}")
    slo = parse_slo(f"{metric}<=0")  # validates the metric's name
    return SLO(metric=slo.metric, op="<=", value=0.0, job_type=slo.job_type)


def _x_of(x: str | Callable[[Mapping[str, Any]], float]) -> Callable[[Mapping[str, Any]], Any]:
    if callable(x):
        return x
    return lambda params: params[x]


def _order(value: Any) -> tuple[int, float, str]:
    """Numbers in numeric order, then anything else by its text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def sweep_metric(points: Sequence[Point], x: str | Callable[[Mapping[str, Any]], float], *,
                 metric: str = "p95_wait", by: str | None = None, slo: SLO | str | None = None,
                 recommended: Mapping[str, Any] | None = None, xlabel: str | None = None,
                 yscale: str = "linear", title: str | None = None) -> Figure:
    """One Summary metric over a sweep: one line per value of the ``by`` parameter.

    Args:
        points: sweep or plan points (``{"params", "summary"}``).
        x: the parameter path on the x axis, or a function of a point's params
            (e.g. ``lambda p: p["pools.p.workers"] * p["pools.p.concurrency"]`` for slots).
        metric: a metric as in an SLO: ``p95_wait``, ``mean_latency``,
            ``utilization``, ``p95_wait[bulk]`` ...
        by: a parameter path; one line per value (None: one line).
        slo: draws the objective as a horizontal line (when it is about
            ``metric``); points that meet it are filled, the others hollow.
        recommended: the params of the recommended point (``plan(...)["recommended"]``), starred.
        yscale: ``linear``, ``log`` or ``symlog`` (linear below 0.1, for waits of unstable points
            that dwarf the rest while zero waits still show).

    Points whose metric is undefined (nothing completed) are left out.
    """
    m = _metric(metric)
    goal = parse_slo(slo) if isinstance(slo, str) else slo
    xof = _x_of(x)
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    groups: dict[Any, list[tuple[Any, float, bool, Point]]] = {}
    for p in points:
        value = m.measure(p["summary"])
        if value is None or not math.isfinite(value):
            continue
        met = goal.met(p["summary"]) if goal is not None else True
        groups.setdefault(p["params"][by] if by else None, []).append((xof(p["params"]), value, met, p))
    for key in sorted(groups, key=_order) if by else groups:
        rows = sorted(groups[key], key=lambda r: r[0])
        xs = [r[0] for r in rows]
        ys = [r[1] for r in rows]
        label = f"{by.rsplit('.', 1)[-1]} = {key}" if by else metric
        line: Any = ax.plot(xs, ys, label=label)[0]
        color = line.get_color()
        met_rows = [r for r in rows if r[2]]
        missed = [r for r in rows if not r[2]]
        if met_rows:
            ax.plot([r[0] for r in met_rows], [r[1] for r in met_rows], "o", color=color)
        if missed:
            ax.plot([r[0] for r in missed], [r[1] for r in missed], "o", color=color, markerfacecolor="none")
        if recommended is not None:
            for r in rows:
                if all(r[3]["params"].get(k) == v for k, v in recommended.items()):
                    ax.plot([r[0]], [r[1]], "*", color="black", markersize=14, label="recommended", zorder=5)
    if goal is not None and goal.metric == m.metric and goal.job_type == m.job_type:
        ax.axhline(goal.value, color="red", linestyle="--", linewidth=1, label=f"SLO {goal}")
    if yscale == "symlog":
        ax.set_yscale("symlog", linthresh=0.1)  # linear below 0.1 s, so zero waits still show
    else:
        ax.set_yscale(yscale)
    if yscale != "log":
        ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel or (x if isinstance(x, str) else "x"))
    ax.set_ylabel(metric + (" (s)" if m.metric.endswith(("_wait", "_latency")) else ""))
    ax.set_title(title or f"{metric} over the sweep")
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def model_theory_table(scenario: Scenario, points: Sequence[Point], *, what: str = "wait",
                       stats: Sequence[str] = ("mean", "p95", "p99"), job_type: str | None = None) -> pd.DataFrame:
    """Model against closed form (:func:`~qsim.analysis.theory.predict`) at every sweep point.

    One row per point: the varied params, ``rho``, the closed form's name
    (``theory``), then ``model_<stat>``, ``theory_<stat>`` for each stat of
    ``what`` (``wait`` or ``latency``), of all jobs or of one ``job_type``.
    Theory is NaN where no closed form applies (unstable, or a quantile the
    closed form does not give); ``note`` says why.
    """
    if what not in ("wait", "latency"):
        raise ValueError(f"what must be wait or latency, got {what!r}")
    if job_type is not None and job_type not in {j.name for j in scenario.jobs}:
        raise ValueError(f"job_type must name a job type of the scenario, got {job_type!r}")
    rows: list[dict[str, Any]] = []
    for p in points:
        row: dict[str, Any] = dict(p["params"])
        try:
            th = predict(with_params(scenario, p["params"]))
            row.update(rho=th.rho, theory=th.model, note="")
            predicted: Mapping[str, float | None] = (
                th.by_type.get(job_type, {}).get(what, {}) if job_type is not None else getattr(th, what))
        except TheoryNotApplicable as e:
            row.update(rho=math.nan, theory="", note=str(e))
            predicted = {}
        scope = p["summary"]["by_type"].get(job_type, {}) if job_type is not None else p["summary"]
        measured = scope.get(what, {})
        for stat in stats:
            mv, tv = measured.get(stat), predicted.get(stat)
            row[f"model_{stat}"] = math.nan if mv is None else float(mv)
            row[f"theory_{stat}"] = math.nan if tv is None else float(tv)
        rows.append(row)
    return pd.DataFrame(rows)


def model_vs_theory(table: pd.DataFrame, x: str, *, stats: Sequence[str] = ("mean", "p95", "p99"),
                    what: str = "wait", xlabel: str | None = None, ylabel: str | None = None,
                    yscale: str = "linear", title: str | None = None) -> Figure:
    """The model's measurement (dots) and the closed form (line) of each stat, over ``x``.

    ``table`` is :func:`model_theory_table`'s output, or any table with the
    columns ``x``, ``model_<stat>`` and ``theory_<stat>`` (e.g. attempts per job
    against a closed form: give ``ylabel``, default ``"<what> (s)"``). Points
    without a closed form show the model only.
    """
    for col in [x] + [f"{side}_{s}" for s in stats for side in ("model", "theory")]:
        if col not in table.columns:
            raise ValueError(f"table has no column {col!r} (columns: {', '.join(map(str, table.columns))})")
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    rows = table.sort_values(x)
    for stat in stats:
        line: Any = ax.plot(rows[x], rows[f"theory_{stat}"], label=f"theory {stat}")[0]
        ax.plot(rows[x], rows[f"model_{stat}"], "o", color=line.get_color(), label=f"model {stat}")
    ax.set_yscale(yscale)
    if yscale != "log":
        ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or f"{what} (s)")
    ax.set_title(title or f"{what}: model vs closed form")
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def plan_plot(result: Mapping[str, Any], *, metric: str | None = None, x: str | None = None,
              xlabel: str | None = None, yscale: str = "symlog", title: str | None = None) -> Figure:
    """A plan's points: ``metric`` per point with its confidence interval, the SLO, the recommendation.

    Args:
        result: :func:`~qsim.analysis.plan.planner.plan`'s result (or its JSON).
        metric: a metric key of the points (``p95_wait``, ``p95_wait[cut]``...); default: the first SLO's.
        x: the varied path on the x axis (default: the bisection axis, else the path with the most values);
            one line per value of the other varied paths.
        yscale: ``symlog`` (default: linear below 0.1, for the waits of overloaded points that dwarf the
            rest), ``linear`` or ``log``.

    A point that meets every SLO is filled, one that does not is hollow, an
    unstable one (still trending, :mod:`qsim.analysis.plan.runlength`) is a cross;
    error bars span the interval (none with one replication); the star is the
    recommendation.
    """
    slos = [parse_slo(s) for s in result.get("slo", [])]
    key = metric or (slos[0].target.key if slos else "p95_wait")
    if not any(slo.target.key == key for slo in slos):
        _metric(key)
    paths = list(result.get("vary") or (result["points"][0]["params"] if result["points"] else {}))
    vary = result.get("vary") or {}
    widest = max(reversed(paths), key=lambda q: len(set(vary.get(q, ()))), default=None)
    axis = x or (result.get("search") or {}).get("axis") or widest
    if axis is None or axis not in paths:
        raise ValueError(f"x must be one of the varied paths {paths}, got {axis!r}")
    others = [p for p in paths if p != axis]
    best = result.get("recommended")
    fig = Figure(figsize=(9, 4))
    ax = fig.subplots()
    groups: dict[tuple[Any, ...], list[Point]] = {}
    for p in result["points"]:
        groups.setdefault(tuple(p["params"][o] for o in others), []).append(p)
    for line_key in sorted(groups, key=lambda k: tuple(_order(v) for v in k)):
        rows = sorted(groups[line_key], key=lambda p: _order(p["params"][axis]))
        rows = [p for p in rows if (p.get("metrics", {}).get(key) or {}).get("mean") is not None]
        if not rows:
            continue
        xs = [p["params"][axis] for p in rows]
        stats = [p["metrics"][key] for p in rows]
        ys = [s["mean"] for s in stats]
        label = ", ".join(f"{o.rsplit('.', 1)[-1]} = {v}" for o, v in zip(others, line_key)) or key
        line: Any = ax.plot(xs, ys, linewidth=1, label=label)[0]
        color = line.get_color()
        lows = [s["mean"] - s["ci"][0] if s.get("ci") else 0.0 for s in stats]
        highs = [s["ci"][1] - s["mean"] if s.get("ci") else 0.0 for s in stats]
        ax.errorbar(xs, ys, yerr=[lows, highs], fmt="none", ecolor=color, capsize=3, linewidth=1)
        for xv, yv, p in zip(xs, ys, rows):
            if p.get("run_length", {}).get("unstable"):
                ax.plot([xv], [yv], "x", color=color)
            else:
                ax.plot([xv], [yv], "o", color=color, markerfacecolor=color if p["meets_slo"] else "none")
            if best is not None and all(p["params"].get(k) == v for k, v in best.items()):
                ax.plot([xv], [yv], "*", color="black", markersize=15, zorder=5, label="recommended: " + ", ".join(
                    f"{k.rsplit('.', 1)[-1]} = {v}" for k, v in best.items()))
    for slo in slos:
        if slo.target.key == key:
            ax.axhline(slo.judged[1], color="red", linestyle="--", linewidth=1, label=f"SLO {slo}")
    if yscale == "symlog" and key.startswith("share_of_windows("):  # a share (0..1): linear
        yscale = "linear"
    if yscale == "symlog":
        ax.set_yscale("symlog", linthresh=0.1)
    else:
        ax.set_yscale(yscale)
    if yscale != "log":
        ax.set_ylim(bottom=0)
    reps = result.get("replications", 1)
    conf = result.get("confidence", 0.95)
    ax.set_xlabel(xlabel or axis)
    ax.set_ylabel(key + (" (s)" if key.split("[", 1)[0].endswith(("_wait", "_latency")) else ""))
    ax.set_title(title or f"{key} per point ({reps} replications, {conf:.0%} intervals)")
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig
