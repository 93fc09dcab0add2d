"""``--slo`` in a load test: the run's Summary, the verdict at the end, and when to give up early.

Nothing here imports Locust (:mod:`qsim.loadtest.hooks` wires it in).

- :func:`run_summary`: a Summary (:func:`qsim.results.summary.summarize`) of the jobs
  this process added and saw end (flow and fan-out children included), with
  the jobs never seen to end as ``unfinished`` or ``lost`` (:meth:`LoadTestRun.sweep
  <qsim.loadtest.run.LoadTestRun.sweep>`). Times are seconds since the first
  enqueue; no warm-up is left out; ``utilization`` is 0 (the load test does
  not know the workers' slots).
- :func:`qsim.analysis.slo.thresholds.judge` then gives the verdict of each threshold.
- Distributed (``--master``/``--worker``, ``--processes``): each worker sends
  its :func:`job_rows` (times on Redis's clock, which every process shares) to
  the master, which judges the Summary of them all (:func:`merge_rows`,
  :func:`rows_summary`): whole-run and per-window thresholds alike.
- :func:`doomed`: the thresholds that can no longer be met, whatever the rest
  of the run does (``--abort-on-fail``): a count (``dead``) or a maximum
  (``max_wait``) already past its bound, a mean that stays above its bound
  even if every job still to come took 0 s, or a quantile with already so many
  values above its bound that it stays above it at the most jobs the run can
  still measure (every arrival still to come counted). Only upper bounds
  (``<=``, ``<``, ``==``) of the whole run or of one job type are judged early;
  other forms wait for the end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from qsim.analysis.slo.language import SLO
from qsim.loadtest.run import LoadTestRun
from qsim.results.records import Records, jobs_frame
from qsim.results.summary import Summary, summarize
from qsim.spec.scenario import Scenario

__all__ = ["run_summary", "job_rows", "merge_rows", "rows_summary", "ROW_COLUMNS", "doomed", "max_jobs"]


#: The columns of :func:`job_rows` (a job's times in seconds since the epoch, on Redis's clock).
ROW_COLUMNS = ("job_id", "type", "queue", "priority", "enqueued", "started", "finished", "attempts",
               "failed_attempts", "stalled", "worker", "outcome", "parent")


#: Outcomes of a job its process did not see end.
_NOT_SEEN = ("unfinished", "lost")


def job_rows(run: LoadTestRun, fates: Mapping[str, str] | None = None) -> dict[str, list[Any]]:
    """The jobs this process added and saw end, one row each, as columns (:data:`ROW_COLUMNS`; ``fates``:
    :meth:`LoadTestRun.sweep`'s answer, else every job not seen to end is ``unfinished``). Plain lists, so a
    Locust worker can send them to its master (:func:`merge_rows`)."""
    fates = fates or {}
    priority = {j.name: j.priority for j in run.scenario.jobs}
    cols: dict[str, list[Any]] = {c: [] for c in ROW_COLUMNS}

    def row(job_id: str, job_type: str, queue: str, enq: float, started: float, finished: float, attempts: int,
            failed: int, outcome: str) -> None:
        for c, v in zip(cols, (job_id, job_type, queue, priority.get(job_type, 0), enq, started, finished,
                               max(attempts, 0), max(failed, 0), 0, "", outcome, "")):
            cols[c].append(v)

    for job in run.ended.values():
        started = job.enqueued_at + job.wait if job.wait is not None else math.nan
        row(job.job_id, job.type, job.queue, job.enqueued_at, started, job.enqueued_at + job.latency, job.attempts,
            job.failed_attempts, job.outcome)
    for job_id, (queue, job_type, added_at) in run.added_jobs.items():
        if job_id not in run.ended:
            row(job_id, job_type, queue, added_at, math.nan, math.nan, 0, 0, fates.get(job_id, "unfinished"))
    return cols


def merge_rows(parts: Sequence[Mapping[str, Sequence[Any]]]) -> dict[str, list[Any]]:
    """Several processes' :func:`job_rows` as one table. A job id in several parts (an observer sees every
    process's jobs end) is kept once: the row of a process that saw it end, over one that did not."""
    cols: dict[str, list[Any]] = {c: [] for c in ROW_COLUMNS}
    where: dict[str, int] = {}
    for part in parts:
        for i, job_id in enumerate(part["job_id"]):
            k = where.get(job_id)
            if k is None:
                where[job_id] = len(cols["job_id"])
                for c in ROW_COLUMNS:
                    cols[c].append(part[c][i])
            elif cols["outcome"][k] in _NOT_SEEN and part["outcome"][i] not in _NOT_SEEN:
                for c in ROW_COLUMNS:
                    cols[c][k] = part[c][i]
    return cols


def rows_summary(rows: Mapping[str, Sequence[Any]], scenario: Scenario, *, source: str) -> Summary:
    """The Summary of :func:`job_rows` (or :func:`merge_rows`), times from the first enqueue."""
    cols = {c: list(rows[c]) for c in ROW_COLUMNS}
    t0 = min(cols["enqueued"], default=0.0)
    for key in ("enqueued", "started", "finished"):
        cols[key] = [v - t0 for v in cols[key]]
    return summarize(Records(jobs=jobs_frame(cols)), scenario=scenario.name, source=source,
                     seed=scenario.seed, window=scenario.window_length)


def run_summary(run: LoadTestRun, fates: Mapping[str, str] | None = None, *, source: str | None = None) -> Summary:
    """The Summary of this process's jobs (``fates``: :meth:`LoadTestRun.sweep`'s answer, else every job
    not seen to end is ``unfinished``)."""
    label = source or ("bullmq" if run.config.target == "bullmq" else "engine")
    return rows_summary(job_rows(run, fates), run.scenario, source=label)


def max_jobs(run: LoadTestRun) -> dict[str | None, int]:
    """The most jobs this run can measure in all (key None) and per job type: the jobs added once the
    arrival window closed, else an upper bound (the rate over the whole window, 10% and 20 jobs more,
    flow children counted with their parents; a rate profile's peak rate, as its jobs follow it)."""
    if not run.window_open():
        out: dict[str | None, int] = {None: len(run.added_jobs) + len(run.ended.keys() - run.added_jobs.keys())}
        for _q, job_type, _t in run.added_jobs.values():
            out[job_type] = out.get(job_type, 0) + 1
        for job_id, job in run.ended.items():
            if job_id not in run.added_jobs:  # fan-out children, added by handlers
                out[job.type] = out.get(job.type, 0) + 1
        return out
    expected: dict[str, float] = {}
    for name, rate in run.rates.items():
        spec = run.scenario.job(name)
        profile = getattr(spec.arrival, "profile", None)
        n = rate * (profile.peak / profile.mean if profile is not None and profile.mean > 0 else 1.0) * run.window
        expected[name] = expected.get(name, 0.0) + n
        kids = list(spec.flow.children) if spec.flow else [spec.fan_out.job] * spec.fan_out.count if spec.fan_out else []
        for kid in kids:
            expected[kid] = expected.get(kid, 0.0) + n
    bound: dict[str | None, int] = {name: int(math.ceil(n * 1.1)) + 20 for name, n in expected.items()}
    bound[None] = sum(bound.values())
    return bound


def _values(run: LoadTestRun, what: str, job_type: str | None) -> np.ndarray:
    jobs = [j for j in run.ended.values() if job_type is None or j.type == job_type]
    if what == "wait":
        return np.array([j.wait for j in jobs if j.wait is not None], dtype=float)
    return np.array([j.latency for j in jobs if j.outcome == "completed"], dtype=float)


def _beyond(x: float, value: float, op: str) -> bool:
    """Whether ``x`` breaks the upper bound ``op value``."""
    return x > value if op in ("<=", "==") else x >= value


def doomed(run: LoadTestRun, slos: Sequence[SLO]) -> list[str]:
    """The thresholds (as written by ``str(slo)``) this run can no longer meet (see the module docstring)."""
    out = []
    limits: dict[str | None, int] | None = None
    for slo in slos:
        scope = f"[{slo.job_type}]" if slo.job_type else ""
        if slo.op not in ("<=", "<", "==") or str(slo) != f"{slo.metric}{scope}{slo.op}{slo.value:g}":
            continue  # a lower bound, or a form beyond the whole run (per window: only the end tells)
        metric, value = slo.metric, slo.value
        if metric == "dead":
            if _beyond(float(sum(1 for j in run.ended.values() if j.outcome == "dead")), value, slo.op):
                out.append(str(slo))
            continue
        if "_" not in metric or metric.split("_", 1)[1] not in ("wait", "latency"):
            continue  # throughput, utilization, lost: only the end tells
        stat, what = metric.split("_", 1)
        x = _values(run, what, slo.job_type)
        if not x.size:
            continue
        if limits is None:
            limits = max_jobs(run)
        n_max = max(limits.get(slo.job_type, limits[None]), int(x.size))
        if stat == "max":
            hit = _beyond(float(x.max()), value, slo.op)
        elif stat == "mean":
            hit = _beyond(float(x.sum()) / n_max, value, slo.op)
        else:
            q = int(stat[1:]) / 100.0
            over = int((x > value).sum()) if slo.op in ("<=", "==") else int((x >= value).sum())
            hit = over >= n_max - math.floor((n_max - 1) * q)
        if hit:
            out.append(str(slo))
    return out
