"""What ``simulate``, ``run`` and ``compare`` share for the Summary's windows.

``--window S`` sets the window length (it overrides the scenario's ``window``;
at most the measured run, ``duration - warmup``), ``--windows`` prints the
per-window table, and ``--out DIR`` writes ``windows.csv`` and ``windows.png``
(rate, depth and p95 wait over time; model beside engine for ``compare``).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from qsim.cli.common import fmt, pos_float
from qsim.errors import ScenarioError
from qsim.results.display import fixed
from qsim.results.windows import DEFAULT_WINDOW
from qsim.spec.run_size import check_run_size
from qsim.spec.scenario import Scenario

__all__ = ["add_window_args", "apply_window", "format_windows", "format_window_comparison", "windows_frame",
           "write_windows"]


def add_window_args(p: argparse.ArgumentParser) -> None:
    """``--window S`` and ``--windows``."""
    p.add_argument("--window", type=pos_float, metavar="S",
                   help=f"length of the Summary's windows in seconds (default: the scenario's window, else "
                        f"{DEFAULT_WINDOW:g}); at most duration - warmup")
    p.add_argument("--windows", action="store_true", help="print the per-window table (arrivals, throughput, "
                   "busy slots, depth, p50/p95/mean wait, oldest age, workers) after the Summary")


def apply_window(scenario: Scenario, seconds: float | None) -> Scenario:
    """``scenario`` with windows of ``seconds`` (None: as it is), checked for the run before it starts: a
    window longer than the run, or a run whose jobs or windows cannot fit in memory
    (:func:`qsim.spec.run_size.check_run_size`), is bad input."""
    if seconds is None:
        check_run_size(scenario)
        return scenario
    run = scenario.duration - scenario.warmup
    if seconds > run:
        raise ScenarioError(f"--window {seconds:g} is longer than the measured run of {scenario.name}: "
                            f"duration - warmup = {run:g} s")
    scenario = dataclasses.replace(scenario, window=seconds)
    check_run_size(scenario, window_option="--window")
    return scenario


def _workers(w: Mapping[str, Any]) -> str:
    return " ".join(f"{pool}={n:.3g}" for pool, n in w["workers"].items()) or "-"


def _band(w: Mapping[str, Any], field: str) -> str:
    b = (w.get("bands") or {}).get(field)
    return "-" if b is None else f"{fmt(b[0])}-{fmt(b[1])}"


def format_windows(summary: Mapping[str, Any], *, replications: int | None = None) -> str:
    """The per-window table of one Summary; with bands (``simulate --replications``), a column of each
    window's 5-95% range of the p95 and of the mean wait over the ``replications``."""
    wins = summary.get("windows") or []
    if not wins:
        return "windows: none (nothing completed after warm-up)"
    banded = any("bands" in w for w in wins)
    head = ("window", "start", "end", "arrivals", "rate/s", "throughput", "busy", "max_depth", "p50 wait",
            "p95 wait", *(("p95 band",) if banded else ()), "mean wait", *(("mean band",) if banded else ()),
            "oldest", "workers")
    rows = []
    for i, w in enumerate(wins):
        length = w["end"] - w["start"]
        rows.append((str(i), fixed(w["start"], None), fixed(w["end"], None), str(w["arrivals"]),
                     fmt(w["arrivals"] / length),
                     fmt(w["throughput"]), fmt(w["busy"]), str(w["max_depth"]), fmt(w["wait_p50"]),
                     fmt(w["wait_p95"]), *((_band(w, "wait_p95"),) if banded else ()), fmt(w.get("mean_wait")),
                     *((_band(w, "mean_wait"),) if banded else ()), fmt(w["oldest_age"]), _workers(w)))
    table = _table(head, rows)
    if banded:
        seed = summary.get("seed")
        seeds = f" (seeds {seed} to {seed + replications - 1})" if replications and isinstance(seed, int) else ""
        table += (f"\nbands: the 5-95% range over {replications or 'the'} replications{seeds}; the other figures "
                  f"are seed {seed}'s run")
    return table


def format_window_comparison(model: Mapping[str, Any], engine: Mapping[str, Any]) -> str:
    """Model and engine window by window: throughput, max depth, p50 and p95 wait, oldest age."""
    mw, ew = model.get("windows") or [], engine.get("windows") or []
    if not mw and not ew:
        return "windows: none (nothing completed after warm-up)"
    head = ("window", "start", "thr model", "thr engine", "depth m", "depth e", "p50 model", "p50 engine",
            "p95 model", "p95 engine", "oldest m", "oldest e")
    rows = []
    for i in range(max(len(mw), len(ew))):
        m = mw[i] if i < len(mw) else None
        e = ew[i] if i < len(ew) else None

        def get(w: Mapping[str, Any] | None, key: str) -> str:
            return "-" if w is None else fmt(w[key])

        rows.append((str(i), fixed((m or e or {}).get("start"), None), get(m, "throughput"), get(e, "throughput"),
                     get(m, "max_depth"), get(e, "max_depth"), get(m, "wait_p50"), get(e, "wait_p50"),
                     get(m, "wait_p95"), get(e, "wait_p95"), get(m, "oldest_age"), get(e, "oldest_age")))
    return _table(head, rows)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def windows_frame(summaries: Mapping[str, Mapping[str, Any]]) -> Any:
    """One row per source and window: ``source, window, start, end, ..., workers.POOL``."""
    import pandas as pd

    rows = []
    for source, summary in summaries.items():
        for i, w in enumerate(summary.get("windows") or []):
            row: dict[str, Any] = {"source": source, "window": i}
            row.update({k: v for k, v in w.items() if k not in ("workers", "bands")})
            for field, band in (w.get("bands") or {}).items():
                row[f"{field}_lo"], row[f"{field}_hi"] = band if band is not None else (None, None)
            row.update({f"workers.{pool}": n for pool, n in w["workers"].items()})
            rows.append(row)
    return pd.DataFrame(rows)


def write_windows(out: Path, summaries: Mapping[str, Mapping[str, Any]], scenario: Scenario) -> list[str]:
    """``windows.csv`` and ``windows.png`` into ``out`` (created if missing, one level: its parent must
    exist, see :mod:`qsim.results.outpath`); returns the names written."""
    from qsim.analysis.plots import windows_plot
    from qsim.results.outpath import make_out_dir

    out = make_out_dir(out, "--out")
    windows_frame(summaries).to_csv(out / "windows.csv", index=False)
    windows_plot(summaries, title=f"{scenario.name}: per window ({scenario.window_length:g} s)").savefig(
        out / "windows.png", dpi=100)
    return ["windows.csv", "windows.png"]
