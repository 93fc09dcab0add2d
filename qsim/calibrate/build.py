"""From measured jobs to a Scenario: one fit per job type, pools, queue limits, overhead.

:func:`calibrate` takes what a source read (:class:`~qsim.calibrate.measured.Measured`)
and returns a :class:`~qsim.calibrate.report.Calibration`: the Scenario and,
for every fitted value, what it came from.

Per job type (its jobs enqueued in the window):

- ``queue`` and ``priority``, ``attempts``, ``backoff``, ``timeout``: the most
  common value among its jobs (a note when they differ);
- ``arrival``: :func:`~qsim.calibrate.arrivals.fit_arrivals`;
- ``service``: :func:`~qsim.calibrate.service.fit_service` on the runs of its
  successful attempts, less the engine overhead where the source's runs hold
  it (qsim's engine; see :mod:`qsim.calibrate.overhead`: elsewhere the pickup
  is a latency or holds the slot between runs, and the runs are fitted as
  measured); a type with no successful run uses its failed runs (a note says so);
- ``fail_prob``, ``poison_prob``: :func:`~qsim.calibrate.failures.fit_failures`.

The scenario's ``duration`` is the window's length, ``warmup`` 0, ``seed`` 0.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qsim.calibrate.arrivals import fit_arrivals
from qsim.calibrate.failures import fit_failures
from qsim.calibrate.measured import Measured, data_window
from qsim.calibrate.overhead import NO_OVERHEAD, Overhead, estimate_from_jobs
from qsim.calibrate.pools import busy_spans, fit_pools, runs_of
from qsim.calibrate.report import Calibration, with_paths
from qsim.calibrate.service import MIN_FIT, fit_service
from qsim.calibrate.typefit import TypeFit
from qsim.errors import CalibrationError
from qsim.spec.backoff import MAX_BACKOFF
from qsim.spec.scenario import BackoffSpec, JobType, PoolSpec, QueueSpec, RateLimit, Scenario

__all__ = ["calibrate", "MIN_JOBS", "SERVICE_MODES", "ARRIVAL_MODES"]

logger = logging.getLogger(__name__)

#: A job type needs at least this many jobs in the window.
MIN_JOBS = 30
SERVICE_MODES = ("fit", "empirical")
ARRIVAL_MODES = ("fit", "trace")


def _mode(values: Any) -> Any:
    counts = Counter(v for v in values if not (isinstance(v, float) and math.isnan(v)))
    return counts.most_common(1)[0][0] if counts else None


def _varied(values: Any, what: str) -> str:
    distinct = {v for v in values if not (isinstance(v, float) and math.isnan(v))}
    return f"{what} differs between its jobs ({len(distinct)} values): the most common is used" \
        if len(distinct) > 1 else ""


def _runs(jobs: pd.DataFrame, attempts: pd.DataFrame, ids: set[str], *, ok: bool) -> np.ndarray:
    """Run lengths of one type's successful attempts (``ok``) or of its failed ones."""
    if len(attempts):
        a = attempts[attempts["job_id"].isin(ids)]
        a = a[a["result"] == "ok"] if ok else a[a["result"].isin(["failed", "timeout"])]
        return (a["end"] - a["start"]).to_numpy(float)
    j = jobs[jobs["job_id"].isin(ids) & (jobs["outcome"] == ("completed" if ok else "dead"))]
    start = j["last_start"].to_numpy(float).copy()
    single = ~np.isfinite(start) & (j["attempts"].to_numpy() <= 1)  # one attempt, or not recorded
    start[single] = j["started"].to_numpy(float)[single]
    return np.asarray(j["finished"].to_numpy(float) - start, dtype=float)


def _type_names(jobs: pd.DataFrame) -> tuple[pd.Series, list[str]]:
    """The scenario name of every job's type (``queue:name`` where one name is in several queues)."""
    per = jobs.groupby("type")["queue"].nunique()
    shared = set(per[per > 1].index)
    names = jobs["type"].where(~jobs["type"].isin(shared), jobs["queue"] + ":" + jobs["type"])
    notes = [f"job type {t!r} is in several queues: one type per queue, named 'queue:{t}'" for t in sorted(shared)]
    return names, notes


def calibrate(measured: Measured, *, service: str = "fit", arrivals: str = "fit", min_jobs: int = MIN_JOBS,
              min_fit: int = MIN_FIT, overhead: Overhead | None = None, name: str = "calibrated") -> Calibration:
    """Fit a Scenario to measured jobs.

    Args:
        service: ``fit`` (exponential, gamma or lognormal, best by KS) or
            ``empirical`` (the measured runs as a CSV).
        arrivals: ``fit`` (poisson, burst or constant) or ``trace`` (the measured times).
        min_jobs: Fewer jobs of a type in the window is an error.
        min_fit: Fewer successful runs of a type keeps them as measured (empirical), with a warning.
        overhead: The engine overhead to use (e.g. from the probe); None estimates
            ``fetch_overhead`` from the measured jobs' low-load periods.

    Raises:
        CalibrationError: no jobs in the window, too few jobs of a type, no run to measure.
    """
    if service not in SERVICE_MODES:
        raise CalibrationError(f"service must be one of {', '.join(SERVICE_MODES)}, got {service!r}")
    if arrivals not in ARRIVAL_MODES:
        raise CalibrationError(f"arrivals must be one of {', '.join(ARRIVAL_MODES)}, got {arrivals!r}")
    start, end = _window(measured)
    jobs, notes = _typed_jobs(measured.jobs, min_jobs)
    runs = runs_of(jobs, measured.attempts)
    queues = sorted(set(jobs["queue"]))
    pools = fit_pools(runs, queues)
    slots = sum(p.workers * p.concurrency for p in pools)
    if overhead is None:
        spans = runs if len(measured.attempts) else busy_spans(jobs, runs)
        overhead = estimate_from_jobs(jobs, spans, slots, pickup_in_run=measured.pickup_in_run) if len(runs) \
            else NO_OVERHEAD
    warnings: list[str] = list(measured.notes) + notes
    shift = overhead.in_slot
    if overhead.by_load and overhead.in_run:  # the overhead at the load the measured jobs ran at
        busy = float((runs["end"] - runs["start"]).sum()) / (max(slots, 1) * (end - start)) if len(runs) else 0.0
        shift = overhead.in_slot_at(busy)
        warnings.append(f"service fitted less the probe's overhead at the measured utilization {busy:.2f} "
                        f"({shift * 1e3:.3g} ms per run, from its overhead_by_load)")
    fits: dict[str, TypeFit] = {}
    specs: list[JobType] = []
    for tname in sorted(set(jobs["type"])):
        fit = _fit_type(measured, jobs, tname, (start, end), shift=shift, service=service, arrivals=arrivals,
                        min_fit=min_fit)
        if fit.service.kind == "empirical" and service != "empirical":
            warnings.append(f"job type {tname!r}: {fit.service.note}")
        fits[tname] = fit
        specs.append(JobType(name=tname, queue=fit.queue, priority=fit.priority, arrival=fit.arrival.process(),
                             service=fit.service.distribution(), fail_prob=fit.failures.fail_prob,
                             poison_prob=fit.failures.poison_prob, attempts=fit.attempts, backoff=fit.backoff,
                             timeout=max(0.0, fit.timeout)))
    pspecs = tuple(PoolSpec(name=p.name, queues=p.queues, workers=p.workers, concurrency=p.concurrency) for p in pools)
    scenario = with_paths(Scenario(name=name, duration=end - start, queues=_queue_specs(measured, queues),
                                   jobs=tuple(specs), pools=pspecs, engine=overhead.engine()),
                          Path(), name)  # CSV names until written beside a TOML
    for w in warnings:  # the report carries them; the CLI prints them with the table
        logger.info("%s", w)
    return Calibration(scenario=scenario, types=fits, pools=tuple(pools), overhead=overhead, measured=measured,
                       window=(start, end), warnings=tuple(warnings))


def _window(measured: Measured) -> tuple[float, float]:
    """The measured window (the jobs' own span when the source gave none); an error without one to measure."""
    jobs = measured.jobs
    if len(jobs) == 0:
        raise CalibrationError(f"no jobs in the window from {measured.source or 'the source'}")
    start, end = measured.window
    if not (math.isfinite(start) and math.isfinite(end)):
        start, end = data_window(jobs["enqueued"].to_numpy(float), None, None)
    if not end > start:
        raise CalibrationError(f"the window holds jobs enqueued at one instant only ({len(jobs)} jobs): "
                               "no arrival rate can be measured")
    return start, end


def _typed_jobs(jobs: pd.DataFrame, min_jobs: int) -> tuple[pd.DataFrame, list[str]]:
    """The jobs with their job type names settled (and notes on how), each type with at least ``min_jobs``."""
    names, notes = _type_names(jobs)
    jobs = jobs.assign(type=names.to_numpy())
    counts = jobs["type"].value_counts()
    few = counts[counts < min_jobs]
    if len(few):
        listed = ", ".join(f"{t!r} ({n})" for t, n in sorted(few.items()))
        raise CalibrationError(f"too few jobs in the window for job type{'s' if len(few) > 1 else ''} {listed}: "
                               f"at least {min_jobs} are needed (widen --since/--until or lower --min-jobs)")
    return jobs, notes


def _fit_type(measured: Measured, jobs: pd.DataFrame, tname: str, window: tuple[float, float], *, shift: float,
              service: str, arrivals: str, min_fit: int) -> TypeFit:
    """One job type's fits: service (less ``shift``), arrivals over ``window``, failures, and its settings."""
    mine = jobs[jobs["type"] == tname]
    ids = set(mine["job_id"])
    tnotes: list[str] = []
    good = _runs(jobs, measured.attempts, ids, ok=True)
    good = good[np.isfinite(good)]
    if good.size == 0:
        good = _runs(jobs, measured.attempts, ids, ok=False)
        good = good[np.isfinite(good)]
        if good.size:
            tnotes.append("no successful run: service measured on failed runs")
    if good.size == 0:
        raise CalibrationError(f"job type {tname!r} has no finished run in the window: its service time "
                               "cannot be measured")
    sfit = fit_service(good, shift=shift, empirical=service == "empirical", min_fit=min_fit,
                       resolution=measured.resolution)
    afit = fit_arrivals(mine["enqueued"].to_numpy(float), *window, resolution=measured.resolution,
                        trace=arrivals == "trace")
    ffit = fit_failures(mine["outcome"].to_numpy(), mine["failed_attempts"].to_numpy(),
                        mine["max_attempts"].to_numpy())
    attempts = _mode(mine["max_attempts"][mine["max_attempts"] > 0]) or 1
    backoff, note = _backoff(mine)
    if note:
        tnotes.append(note)
    for note in (_varied(mine["priority"], "priority"), _varied(mine["max_attempts"], "attempts"),
                 _varied(mine["timeout"], "timeout"), ffit.note, afit.note):
        if note:
            tnotes.append(note)
    return TypeFit(name=tname, queue=str(_mode(mine["queue"])), priority=int(_mode(mine["priority"]) or 0),
                   attempts=int(attempts), backoff=backoff,
                   timeout=float(_mode(mine["timeout"]) or 0.0), arrival=afit, service=sfit, failures=ffit,
                   jobs=len(mine), notes=tuple(tnotes))


def _backoff(mine: pd.DataFrame) -> tuple[BackoffSpec, str | None]:
    """The backoff most of a type's jobs had (the default without), and a note when the jobs gave it no cap."""
    with_backoff = mine[mine["backoff_kind"] != ""]
    if not len(with_backoff):
        return BackoffSpec(), None
    kind, delay, cap, jitter = _mode(zip(with_backoff["backoff_kind"], with_backoff["backoff_delay"],
                                         with_backoff["backoff_max"], with_backoff["backoff_jitter"]))
    note = None
    if not math.isfinite(cap):  # the jobs give no cap (BullMQ's exponential backoff has none)
        cap = MAX_BACKOFF if kind == "exponential" else delay
        if kind == "exponential":
            note = (f"backoff: the jobs' exponential backoff has no cap: max = {MAX_BACKOFF:.0f} s is "
                    "the engine's longest delay (365 days), no cap in effect")
    backoff = BackoffSpec(kind=kind, delay=float(delay), max=float(cap), jitter=float(min(max(jitter, 0), 1)))
    return backoff, note


def _queue_specs(measured: Measured, queues: list[str]) -> tuple[QueueSpec, ...]:
    """The queues with the limits the source reported for them."""
    qspecs = []
    for q in queues:
        c = measured.queues.get(q)
        rl = RateLimit(max=c.rate_max, per=c.rate_per, key=c.rate_key or None) \
            if c and c.rate_max and c.rate_per else None
        qspecs.append(QueueSpec(name=q, concurrency_limit=c.concurrency_limit if c else None, rate_limit=rl,
                                aging=c.aging if c else 0.0))
    return tuple(qspecs)
