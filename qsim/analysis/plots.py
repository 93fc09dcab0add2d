"""Plots shared by the CLI and the notebooks (matplotlib, no global state)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

__all__ = ["queue_depth", "wait_distribution"]


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
