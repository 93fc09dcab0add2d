"""Model prediction vs engine measurement, scenario by scenario: prints a table; not part of the test run.

The principle of qsim is that a prediction and a measurement are of the same
thing. This benchmark checks it mechanism by mechanism: for each small
scenario it runs the SimPy model (:func:`qsim.model.simulate`) and the real
engine (:func:`qsim.harness.run_scenario`: worker processes, real time, the
model's own arrival/service/failure draws) on the SAME scenario and seed, and
prints ``scenario, metric, model, engine, engine/model`` plus the jobs the
engine lost (must be 0).

Scenarios (each ~7-15 s of real time on the engine; ~6 min in all with 3 seeds, --quick ~1.5 min):

* ``light``      M/M/c at rho ~0.2: calibrates ``[engine] fetch_overhead``;
* ``mmc``        M/M/c at rho ~0.7, with Erlang C from :func:`qsim.analysis.theory.predict`;
* ``priority``   two priorities on one queue (the low one waits longer);
* ``wrr``        two backlogged queues, wrr weights 3:1 (share of starts: 0.75);
* ``retries``    fail_prob, a poison share, 3 attempts (dead, failed_attempts);
* ``conc_limit`` a global concurrency_limit of 3 under 8 slots;
* ``rate_limit`` 20 starts per 1 s (throughput = max/per);
* ``sigkill``    one process of three killed (stalled count, recovery delay);
* ``sigterm``    one process of two stopped with a 0.3 s grace (cut-offs handed back);
* ``flow_fan``   a flow (parent after two children) and a fan-out.

Calibration: the model's ``fetch_overhead`` (per attempt, slot held, before
the handler starts, so counted in the model's wait) is fitted on the
light-load runs (same jobs, same service times, hardly any queueing: the
difference is the engine's per-job overhead), two ways: ``fo_w`` makes the
model's mean wait equal the engine's, ``fo_l`` its mean latency. The engine's
overhead has two parts — pickup (enqueue -> fetch stamp, in its wait, ~2.5 ms)
and in-slot (fetch -> acknowledged beyond the service, ~4 ms, in its latency
but not its wait) — and the model has one knob before the start stamp, so
``fo_l`` counts the in-slot part into every wait too; ``fo_w`` is the one to
use (it brings wait and latency ratios closest, see the summary line). Every
scenario is simulated again with each fitted value and the ratios shown.

Figures are medians over ``--runs`` seeds (``seed``, ``seed+1``, ...); the
ratio column is the median of the per-seed ratios. Timings on a loaded 2-core
machine are noisy: read ratios of waits to +-20 %, counts exactly.

Starts its own throwaway redis-server on a free port (never touches 6379).

Usage: ``python benchmarks/model_vs_engine.py [--runs 3] [--quick] [--only mmc,wrr] [--seed 1] [--json]``
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from qsim.analysis.theory import TheoryNotApplicable, predict  # noqa: E402
from qsim.harness import RedisServer, run_scenario  # noqa: E402
from qsim.model import simulate  # noqa: E402
from qsim.spec.scenario import Scenario  # noqa: E402

FAST_ENGINE = {"lock_duration": 2.0, "stalled_interval": 1.0}


# -- scenarios ------------------------------------------------------------------
def _exp(mean: float) -> dict[str, Any]:
    return {"kind": "exponential", "mean": mean}


def _const(mean: float) -> dict[str, Any]:
    return {"kind": "constant", "mean": mean}


def sc_light(d: float) -> dict[str, Any]:
    return {"name": "light", "duration": d, "warmup": 1.0, "queues": [{"name": "q"}],
            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 8.0}, "service": _exp(0.1)}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 2}]}


def sc_mmc(d: float) -> dict[str, Any]:
    return {"name": "mmc", "duration": d, "warmup": 1.0, "queues": [{"name": "q"}],
            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 28.0}, "service": _exp(0.1)}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 2}]}


def sc_priority(d: float) -> dict[str, Any]:
    return {"name": "priority", "duration": d, "warmup": 1.0, "queues": [{"name": "q"}],
            "jobs": [{"name": "high", "queue": "q", "priority": 0, "arrival": {"kind": "poisson", "rate": 12.0},
                      "service": _exp(0.1)},
                     {"name": "low", "queue": "q", "priority": 5, "arrival": {"kind": "poisson", "rate": 13.0},
                      "service": _exp(0.1)}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 3}]}


def sc_wrr(d: float) -> dict[str, Any]:
    return {"name": "wrr", "duration": d, "queues": [{"name": "big"}, {"name": "small"}],
            "jobs": [{"name": "b", "queue": "big", "arrival": {"kind": "constant", "rate": 50.0},
                      "service": _const(0.05)},
                     {"name": "s", "queue": "small", "arrival": {"kind": "constant", "rate": 50.0},
                      "service": _const(0.05)}],
            "pools": [{"name": "p", "queues": ["big", "small"], "policy": "wrr", "weights": {"big": 3, "small": 1},
                       "workers": 1, "concurrency": 3}]}


def sc_retries(d: float) -> dict[str, Any]:
    return {"name": "retries", "duration": d, "queues": [{"name": "q"}],
            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 15.0}, "service": _exp(0.05),
                      "fail_prob": 0.3, "poison_prob": 0.05, "attempts": 3,
                      "backoff": {"kind": "exponential", "delay": 0.2, "max": 1.0}}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 3}]}


def sc_conc_limit(d: float) -> dict[str, Any]:
    return {"name": "conc_limit", "duration": d, "warmup": 1.0, "queues": [{"name": "q", "concurrency_limit": 3}],
            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": 21.0}, "service": _exp(0.1)}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 4}]}


def sc_rate_limit(d: float) -> dict[str, Any]:
    return {"name": "rate_limit", "duration": d, "queues": [{"name": "q", "rate_limit": {"max": 20, "per": 1.0}}],
            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 30.0},
                      "service": _const(0.02)}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 4}]}


def sc_sigkill(d: float) -> dict[str, Any]:
    return {"name": "sigkill", "duration": d, "queues": [{"name": "q"}],
            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 10.0},
                      "service": _const(0.4)}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 3, "concurrency": 3}],
            "events": [{"at": round(d / 2, 2) + 0.05, "kind": "sigkill", "pool": "p", "count": 1}],
            "engine": dict(FAST_ENGINE)}


def sc_sigterm(d: float) -> dict[str, Any]:
    return {"name": "sigterm", "duration": d, "queues": [{"name": "q"}],
            "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "constant", "rate": 5.0},
                      "service": {"kind": "uniform", "low": 0.5, "high": 1.5}}],
            "pools": [{"name": "p", "queues": ["q"], "workers": 2, "concurrency": 4}],
            "events": [{"at": round(d / 2, 2) + 0.05, "kind": "sigterm", "pool": "p", "count": 1, "grace": 0.3}],
            "engine": dict(FAST_ENGINE)}


def sc_flow_fan(d: float) -> dict[str, Any]:
    return {"name": "flow_fan", "duration": d, "queues": [{"name": "fast"}, {"name": "slow"}],
            "jobs": [
                {"name": "a", "queue": "fast", "arrival": {"kind": "poisson", "rate": 5.0},
                 "service": _const(0.05), "fan_out": {"job": "part", "count": 4}},
                {"name": "part", "queue": "fast", "service": _exp(0.05)},
                {"name": "inv", "queue": "slow", "arrival": {"kind": "poisson", "rate": 3.0},
                 "service": _const(0.05), "flow": {"children": ["fetch", "tax"]}},
                {"name": "fetch", "queue": "fast", "service": _exp(0.1)},
                {"name": "tax", "queue": "slow", "service": _exp(0.2)},
            ],
            "pools": [{"name": "p", "queues": ["fast", "slow"], "policy": "priority", "workers": 2,
                       "concurrency": 3}]}


# -- metrics --------------------------------------------------------------------
Metric = Callable[[Any], float | None]  # a run result (ModelResult or EngineResult) -> value


def S(path: str) -> Metric:
    """A Summary field by dotted path."""
    def get(r: Any) -> float | None:
        node: Any = r.summary
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        return None if node is None else float(node)
    return get


def share_of_starts(queue: str, lo: float, hi: float) -> Metric:
    """Fraction of first starts in [lo, hi) that were jobs of ``queue`` (wrr service share)."""
    def get(r: Any) -> float | None:
        j = r.jobs
        m = (j["started"] >= lo) & (j["started"] < hi)
        return float((j.loc[m, "queue"] == queue).mean()) if m.any() else None
    return get


def attempts_with(result: str) -> Metric:
    """How many attempts ended with ``result`` (stalled, cutoff, failed...)."""
    return lambda r: float((r.records.attempts["result"] == result).sum())


def recovery_delay(kill_at: float, stat: str) -> Metric:
    """Delay from the kill to the restart of each job whose attempt stalled (mean or max)."""
    def get(r: Any) -> float | None:
        a = r.records.attempts.sort_values(["job_id", "attempt"])
        stalled = a[a["result"] == "stalled"]
        delays = []
        for _, row in stalled.iterrows():
            nxt = a[(a["job_id"] == row["job_id"]) & (a["attempt"] == row["attempt"] + 1)]
            if len(nxt):
                delays.append(float(nxt["start"].iloc[0]) - kill_at)
        if not delays:
            return None
        return float(np.mean(delays)) if stat == "mean" else float(np.max(delays))
    return get


def running_on(worker: str, at: float) -> Metric:
    """Attempts the process ``worker`` was running at ``at`` (what a signal then hits)."""
    def get(r: Any) -> float | None:
        a = r.records.attempts
        return float(((a["worker"] == worker) & (a["start"] <= at) & ~(a["end"] <= at)).sum())
    return get


def cutoff_delay(at: float) -> Metric:
    """From the sigterm to the last cut-off (the grace the process got)."""
    def get(r: Any) -> float | None:
        a = r.records.attempts
        ends = a.loc[a["result"] == "cutoff", "end"]
        return float(ends.max()) - at if len(ends) else None
    return get


def max_active(queue: str) -> Metric:
    """Most attempts of ``queue`` running at once."""
    def get(r: Any) -> float | None:
        a, j = r.records.attempts, r.jobs
        a = a[a["job_id"].isin(j.loc[j["queue"] == queue, "job_id"])]
        ev = sorted([(t, 1) for t in a["start"]] + [(t, -1) for t in a["end"]], key=lambda e: (e[0], e[1]))
        return float(max(np.cumsum([d for _, d in ev]))) if ev else None
    return get


def type_count(job_type: str, outcome: str = "completed") -> Metric:
    return lambda r: float(((r.jobs["type"] == job_type) & (r.jobs["outcome"] == outcome)).sum())


COMMON = ["jobs.arrived", "jobs.completed"]
WAITS = ["wait.mean", "wait.p95", "latency.mean", "latency.p95"]


@dataclass
class Case:
    name: str
    build: Callable[[float], dict[str, Any]]
    duration: float
    metrics: list[tuple[str, Metric]] = field(default_factory=list)
    drain: float = 30.0
    note: str = ""


def cases(quick: bool) -> list[Case]:
    k = 0.6 if quick else 1.0

    def d(x: float) -> float:
        return round(x * k, 1)

    def paths(*ps: str) -> list[tuple[str, Metric]]:
        return [(p, S(p)) for p in ps]

    wrr_d, kill_d, term_d = d(6), d(8), d(8)
    kill_at = round(kill_d / 2, 2) + 0.05
    term_at = round(term_d / 2, 2) + 0.05
    return [
        Case("light", sc_light, d(12), paths(*COMMON, *WAITS, "utilization"), note="rho 0.2: fits fetch_overhead"),
        Case("mmc", sc_mmc, d(12), paths(*COMMON, *WAITS, "wait.p99", "utilization", "throughput")),
        Case("priority", sc_priority, d(12), paths(*COMMON, "by_type.high.wait.mean", "by_type.low.wait.mean",
                                                   "by_type.high.wait.p95", "by_type.low.wait.p95", "utilization")),
        Case("wrr", sc_wrr, wrr_d, [*paths(*COMMON), ("share_big_starts", share_of_starts("big", 1.0, wrr_d)),
                                    *paths("by_queue.big.wait.mean", "by_queue.small.wait.mean",
                                           "by_queue.big.max_depth", "by_queue.small.max_depth", "throughput")],
             note="both backlogged (50/s each, 60/s capacity): weights 3:1 -> share 0.75"),
        Case("retries", sc_retries, d(8), paths(*COMMON, "jobs.dead", "jobs.failed_attempts", "latency.mean",
                                                 "latency.p95", "latency.max")),
        Case("conc_limit", sc_conc_limit, d(10), [*paths(*COMMON, "utilization", "wait.mean", "wait.p95",
                                                         "throughput"), ("max_active", max_active("q"))],
             note="3 of 8 slots usable: utilization <= 0.375"),
        Case("rate_limit", sc_rate_limit, d(8), paths(*COMMON, "throughput", "wait.p95", "wait.max"),
             note="throughput = max/per = 20/s"),
        Case("sigkill", sc_sigkill, kill_d, [*paths(*COMMON), ("running_on_killed", running_on("p-0", kill_at)),
                                             *paths("jobs.stalled", "jobs.lost"),
                                             ("recovery.mean", recovery_delay(kill_at, "mean")),
                                             ("recovery.max", recovery_delay(kill_at, "max")),
                                             *paths("latency.max", "latency.p99")],
             note="lock 2 s, stalled check 1 s: back 2-3 s after the kill in the model; the engine renews "
                  "locks every 1 s, so 1-3 s"),
        Case("sigterm", sc_sigterm, term_d, [*paths(*COMMON, "jobs.stalled"),
                                             ("running_on_stopped", running_on("p-0", term_at)),
                                             ("cutoff_attempts", attempts_with("cutoff")),
                                             ("cutoff_delay", cutoff_delay(term_at)),
                                             *paths("latency.max", "latency.mean")],
             note="grace 0.3 s, service 0.5-1.5 s: jobs with > 0.3 s left are cut off and handed back "
                  "(which jobs the stopped process holds differs: engine fetches race)"),
        Case("flow_fan", sc_flow_fan, d(8), [*paths("jobs.arrived", "jobs.completed"),
                                              ("part_done", type_count("part")), ("inv_done", type_count("inv")),
                                              *paths("by_type.inv.latency.mean", "by_type.a.latency.mean",
                                                     "by_type.part.wait.mean", "latency.p95")]),
    ]


# -- running --------------------------------------------------------------------
def scenario_of(raw: dict[str, Any], seed: int, fetch_overhead: float = 0.0) -> Scenario:
    raw = json.loads(json.dumps(raw))
    raw["seed"] = seed
    if fetch_overhead:
        raw.setdefault("engine", {})["fetch_overhead"] = fetch_overhead
    return Scenario.from_dict(raw)


@dataclass
class Run:
    seed: int
    scenario: Scenario
    engine: Any
    model: Any
    cal: dict[str, Any] = field(default_factory=dict)  # fit name -> model result with that fetch_overhead
    seconds: float = 0.0


def run_case(case: Case, url: str, seed: int) -> Run:
    s = scenario_of(case.build(case.duration), seed)
    model = simulate(s)
    t = time.monotonic()
    engine = run_scenario(s, url, drain_timeout=case.drain)
    return Run(seed, s, engine, model, seconds=time.monotonic() - t)


def fit_overhead(runs: list[Run], case: Case, path: str) -> float:
    """fetch_overhead that makes the model's ``path`` (a mean) equal the engine's, per seed; the median."""
    def get(result: Any) -> float:
        value = S(path)(result)
        assert value is not None, path
        return value

    fits = []
    for r in runs:
        target = get(r.engine)
        f = max(0.0, target - get(r.model))
        for _ in range(4):  # fixed point: the overhead also adds a little queueing
            f = max(0.0, f + (target - get(simulate(scenario_of(case.build(case.duration), r.seed, f)))))
        fits.append(f)
    return float(statistics.median(fits))


def split_overhead(runs: list[Run]) -> tuple[float, float]:
    """The engine's per-job overhead at light load, split: (pickup = enqueue -> fetch, in the wait;
    in-slot = fetch -> acknowledged beyond the planned service, in the latency but not the wait)."""
    pick = [r.engine.summary["wait"]["mean"] - r.model.summary["wait"]["mean"] for r in runs]
    lat = [r.engine.summary["latency"]["mean"] - r.model.summary["latency"]["mean"] for r in runs]
    return float(statistics.median(pick)), float(statistics.median(lat)) - float(statistics.median(pick))


def med(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None and not math.isnan(x)]
    return float(statistics.median(ys)) if ys else None


def ratio(e: float | None, m: float | None) -> float | None:
    if e is None or m is None:
        return None
    if m == 0:
        return 1.0 if e == 0 else None
    return e / m


FITS = ("wait", "latency")  # fetch_overhead fitted on the light runs' wait.mean, or latency.mean


def rows_of(case: Case, runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    for label, metric in case.metrics:
        m = [metric(r.model) for r in runs]
        e = [metric(r.engine) for r in runs]
        row = {"scenario": case.name, "metric": label, "model": med(m), "engine": med(e),
               "ratio": med([ratio(a, b) for a, b in zip(e, m)])}
        for fit in FITS:
            c = [metric(r.cal[fit]) if fit in r.cal else None for r in runs]
            row[f"model_{fit}"] = med(c)
            row[f"ratio_{fit}"] = med([ratio(a, b) for a, b in zip(e, c)])
        rows.append(row)
    return rows


def fmt(v: float | None, w: int, digits: str = ".4g") -> str:
    return f"{'-' if v is None else format(v, digits):>{w}}"


def print_table(rows: list[dict[str, Any]], lost: dict[str, list[int]], notes: dict[str, str],
                overheads: dict[str, float]) -> None:
    head = f"{'scenario':<11}{'metric':<25}{'model':>10}{'engine':>10}{'eng/mod':>8}"
    for fit in FITS:
        head += f"{'mod+fo_' + fit[0]:>10}{'eng/mod':>8}"
    print("\n" + head)
    last = None

    def footer(name: str) -> None:
        print(f"{'':<11}{'lost: ' + ','.join(map(str, lost[name])):<25}" + (f"  {notes[name]}" if notes.get(name) else ""))

    for r in rows:
        if r["scenario"] != last and last is not None:
            footer(last)
        last = r["scenario"]
        line = (f"{r['scenario']:<11}{r['metric']:<25}{fmt(r['model'], 10)}{fmt(r['engine'], 10)}"
                f"{fmt(r['ratio'], 8, '.3f')}")
        for fit in FITS:
            line += f"{fmt(r['model_' + fit], 10)}{fmt(r['ratio_' + fit], 8, '.3f')}"
        print(line)
    if last is not None:
        footer(last)


def timing_error(rows: list[dict[str, Any]], key: str) -> float | None:
    """Median |log(engine/model)| over the wait and latency rows (0 = perfect): one number per column."""
    errs = [abs(math.log(r[key])) for r in rows if r[key] and r[key] > 0
            and any(k in r["metric"] for k in ("wait.", "latency."))]
    return float(statistics.median(errs)) if errs else None


def theory_lines(case: Case, seed: int) -> list[str]:
    try:
        t = predict(scenario_of(case.build(case.duration), seed))
    except TheoryNotApplicable as e:
        return [f"  theory: not applicable ({e})"]
    w = t.wait
    return [f"  theory {t.model}: c={t.c} rho={t.rho:.3f} P(wait)={t.p_wait if t.p_wait is None else round(t.p_wait, 3)}"
            f" wait.mean={w['mean']:.4g} wait.p95={w['p95'] if w['p95'] is None else round(w['p95'], 4)}"
            f" latency.mean={t.latency['mean']:.4g} utilization={t.utilization:.3f}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=None, help="seeds per scenario (default 3; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help="shorter scenarios, one run each (< 2 min)")
    ap.add_argument("--seed", type=int, default=1, help="first seed")
    ap.add_argument("--only", default="", help="comma-separated scenario names (light is always run)")
    ap.add_argument("--json", action="store_true", help="print the rows as one JSON document at the end")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    runs_n = a.runs if a.runs is not None else (1 if a.quick else 3)
    all_cases = cases(a.quick)
    only = {x for x in a.only.split(",") if x}
    chosen = [c for c in all_cases if not only or c.name in only or c.name == "light"]
    seeds = [a.seed + i for i in range(runs_n)]
    t_start = time.monotonic()
    results: dict[str, list[Run]] = {}
    lost: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory(prefix="qsim-bench-") as tmp, RedisServer(Path(tmp)) as server:
        for case in chosen:
            results[case.name] = []
            for seed in seeds:
                r = run_case(case, server.url, seed)
                results[case.name].append(r)
                print(f"# {case.name} seed {seed}: engine {r.seconds:.1f} s, "
                      f"lost {r.engine.summary['jobs']['lost']}", file=sys.stderr, flush=True)
            lost[case.name] = [int(r.engine.summary["jobs"]["lost"]) for r in results[case.name]]
    light = next(c for c in chosen if c.name == "light")
    overheads = {fit: fit_overhead(results["light"], light, f"{fit}.mean") for fit in FITS}
    pickup, in_slot = split_overhead(results["light"])
    for case in chosen:
        for r in results[case.name]:
            for fit, fo in overheads.items():
                r.cal[fit] = simulate(scenario_of(case.build(case.duration), r.seed, fo))
    rows = [row for case in chosen for row in rows_of(case, results[case.name])]
    print(f"model vs engine: {len(chosen)} scenarios x {runs_n} seed(s) {seeds}, "
          f"{time.monotonic() - t_start:.0f} s; medians over seeds, eng/mod = median of per-seed engine/model")
    print(f"engine overhead per job at light load: pickup (enqueue -> fetch) {pickup * 1000:.2f} ms, "
          f"in-slot (fetch -> ack, beyond the service) {in_slot * 1000:.2f} ms")
    print("fitted fetch_overhead: " + ", ".join(f"fo_{fit[0]} = {fo * 1000:.2f} ms (light {fit}.mean)"
                                                 for fit, fo in overheads.items()))
    print(f"  -> for this machine: [engine] fetch_overhead = {overheads['wait']:.4f}  (fo_w; the model puts the "
          f"whole overhead before the start stamp, so fo_l double-counts the in-slot part into waits)")
    print_table(rows, lost, {c.name: c.note for c in chosen}, overheads)
    errs = {key: timing_error(rows, key) for key in ("ratio", *(f"ratio_{f}" for f in FITS))}
    print("\nmedian |log(engine/model)| over wait/latency rows: "
          + ", ".join(f"{k}: {'-' if v is None else f'{v:.3f}'}" for k, v in errs.items()))
    for case in chosen:
        if case.name in ("light", "mmc"):
            print(f"{case.name}:")
            for line in theory_lines(case, seeds[0]):
                print(line)
    total_lost = sum(sum(v) for v in lost.values())
    print(f"\njobs lost by the engine: {total_lost}" + ("" if total_lost == 0 else "  <-- MUST BE 0"))
    if a.json:
        print(json.dumps({"fetch_overhead": overheads, "pickup": pickup, "in_slot": in_slot, "lost": lost,
                          "timing_error": errs, "rows": rows}))
    return 0 if total_lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
