"""A Summary from the jobs the BullMQ reader measured (:func:`qsim.calibrate.bullmq_source.read_bullmq`).

The same Summary as the model's and the engine's (:func:`qsim.results.summary.summarize`),
over the jobs of one run: times in seconds since the run started, the
scenario's warm-up left out. What BullMQ records sets its limits:

- ``wait``: from jobs that made one attempt (a retried job's first start is
  not recorded); ``latency`` of every completed job;
- ``failed_attempts``: BullMQ's attempt counts (4.x counts an attempt cut
  short by a stall too); ``stalled``: 0 (not recorded);
- ``utilization``: 0 (the workers' slots are not recorded); compare leaves it out;
- jobs the run added that Redis no longer holds are ``lost``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from qsim.results.records import Records, jobs_frame
from qsim.results.summary import Summary, summarize
from qsim.results.windows import DEFAULT_WINDOW

__all__ = ["summary_from_measured"]


def summary_from_measured(jobs: pd.DataFrame, *, scenario: str, seed: int, t0: float, warmup: float = 0.0,
                          lost: Iterable[tuple[str, str, str, float]] = (), window: float = DEFAULT_WINDOW) -> Summary:
    """The Summary (``source`` ``"bullmq"``) of measured jobs.

    Args:
        jobs: Measured jobs (:data:`qsim.calibrate.measured.MEASURED_COLUMNS`), this run's only.
        t0: When the run started (seconds since the epoch): time 0 of the Summary.
        warmup: Jobs enqueued before ``t0 + warmup`` are left out of the statistics.
        lost: ``(job id, type, queue, enqueue time)`` of jobs added that Redis no longer holds.
        window: The length of the Summary's windows in seconds (the scenario's, to sit beside the model's).
    """
    lost = list(lost)
    n = len(jobs)
    started = jobs["started"].to_numpy(float)
    finished = jobs["finished"].to_numpy(float)
    cols: dict[str, Any] = {
        "job_id": list(jobs["job_id"]) + [j for j, _, _, _ in lost],
        "type": list(jobs["type"]) + [t for _, t, _, _ in lost],
        "queue": list(jobs["queue"]) + [q for _, _, q, _ in lost],
        "priority": np.concatenate([jobs["priority"].to_numpy(np.int64), np.zeros(len(lost), np.int64)]),
        "enqueued": np.concatenate([jobs["enqueued"].to_numpy(float), [e for *_, e in lost]]) - t0,
        "started": np.concatenate([started, np.full(len(lost), math.nan)]) - t0,
        "finished": np.concatenate([finished, np.full(len(lost), math.nan)]) - t0,
        "attempts": np.concatenate([np.clip(jobs["attempts"].to_numpy(np.int64), 0, None), np.zeros(len(lost), np.int64)]),
        "failed_attempts": np.concatenate([np.clip(jobs["failed_attempts"].to_numpy(np.int64), 0, None),
                                           np.zeros(len(lost), np.int64)]),
        "stalled": np.zeros(n + len(lost), np.int64),
        "worker": list(jobs["worker"]) + [""] * len(lost),
        "outcome": list(jobs["outcome"]) + ["lost"] * len(lost),
        "parent": [""] * (n + len(lost)),
    }
    return summarize(Records(jobs=jobs_frame(cols)), scenario=scenario, source="bullmq", seed=seed, warmup=warmup,
                     window=window)
