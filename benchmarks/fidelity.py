"""Fidelity of every mechanism: the standard scenario set on the model and on the engine, side by side.

1. Calibrate the engine once on this machine and put it in every scenario's ``[engine]``:
   ``fetch_overhead`` from the probe of ``qsim calibrate --probe`` (pickup at light load);
   ``ack_overhead`` so that a slot's occupancy per job under a backlog is the engine's, measured over
   several seconds of a backlogged run (the machine's occasional pauses included: the backlogged
   scenarios' waits add up every slot-second lost); and
   ``start_delay``, how long a process started by a ``start`` event takes to take work.
2. Run each standard scenario (``qsim scenarios``) on the model and on the real engine (worker
   processes, real time, real signals) with the same seed: the same jobs, attempts and failures.
3. Print the full table: per scenario the quantities ``qsim compare --check`` judges (p50/p95 wait
   and latency, throughput, dead, lost, unfinished) with model, engine, engine/model, tolerance and
   verdict, plus a few rows per mechanism (shown, not judged: per-type waits, stalled and cut-off
   attempts, recovery delays).

Target: every p50/p95 wait and latency within 10% (or 20 ms), throughput within 3%, dead, lost and
unfinished exact. With ``--runs R`` each scenario runs with R seeds (the scenario's, +1, ...): the
table shows the medians of the model's and of the engine's values over the runs, the verdict judges
those medians (lost: every run), and ``runs`` says in how many runs the quantity passed on its own.

A throwaway redis-server is started on a free port (never 6379). About 5 minutes per run of the
set on a 2-core machine (``--runs 3``, the default: about 16 minutes).

Usage: ``python benchmarks/fidelity.py [--runs 3] [--only steady,wrr] [--jobs N] [--no-probe] [--json]``
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
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from qsim.analysis.fidelity.check import Tolerance, check, unit_of  # noqa: E402
from qsim.analysis.fidelity.compare import field_value  # noqa: E402
from qsim.calibrate import probe  # noqa: E402
from qsim.harness import RedisServer, run_scenario  # noqa: E402
from qsim.model import simulate  # noqa: E402
from qsim.scenarios import STANDARD, builtin  # noqa: E402
from qsim.spec.scenario import Scenario  # noqa: E402

Extra = Callable[[Any], float | None]  # a run result (ModelResult or EngineResult) -> value


CALIBRATION_SERVICE = 0.1


def calibration_scenario() -> Scenario:
    """One worker of 4 slots (40 jobs/s) facing 50 jobs/s for 8 s, and a second worker started at 6 s."""
    return Scenario.from_dict({
        "name": "calibration", "seed": 1, "duration": 8.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "c", "queue": "q", "arrival": {"kind": "constant", "rate": 50.0},
                  "service": {"kind": "constant", "mean": CALIBRATION_SERVICE}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 1, "concurrency": 4}],
        "events": [{"at": 6.0, "kind": "start", "pool": "p", "count": 1}]})


def calibrate(url: str) -> dict[str, float]:
    """``fetch_overhead`` (the probe's pickup at light load); ``ack_overhead``: a slot's occupancy per job
    beyond the handler while the queue is backlogged, less the fetch; ``start_delay``: from a ``start``
    event to the new process's first job, under load. Both from a run resembling the scenarios' load; the
    occupancy is measured over 5.5 s of backlog, so the machine's occasional pauses are in it."""
    o = probe(url)
    cal = run_scenario(calibration_scenario(), url)
    a = cal.records.attempts
    busy = a[(a["worker"] == "p-0") & (a["start"] >= 0.5) & (a["start"] < 6.0)].sort_values("start")
    occupancy = 4 * (busy["start"].iloc[-1] - busy["start"].iloc[0]) / (len(busy) - 1) - CALIBRATION_SERVICE
    started = float(a.loc[a["worker"] == "p-1", "start"].min())
    return {"fetch_overhead": o.fetch_overhead, "ack_overhead": max(0.0, occupancy - o.fetch_overhead),
            "start_delay": max(0.0, started - 6.0), "probe_ack_overhead": o.ack_overhead, "occupancy": occupancy}


def summary(path: str) -> Extra:
    def get(r: Any) -> float | None:
        v = field_value(r.summary, path)
        return None if v is None else float(v)
    return get


def attempts_with(result: str) -> Extra:
    return lambda r: float((r.records.attempts["result"] == result).sum())


def recovery(stat: str, kill: float) -> Extra:
    """Restart of each stalled job's next attempt minus the kill."""
    def get(r: Any) -> float | None:
        a = r.records.attempts.sort_values(["job_id", "attempt"])
        nxt = a.groupby("job_id")["start"].shift(-1)
        delays = (nxt[a["result"] == "stalled"] - kill).dropna().to_numpy()
        if not delays.size:
            return None
        return float(np.mean(delays) if stat == "mean" else np.max(delays))
    return get


EXTRAS: dict[str, list[tuple[str, Extra]]] = {
    "steady": [("wait.mean", summary("wait.mean")), ("utilization", summary("utilization"))],
    "priority-starvation": [(f"{t}.wait.{s}", summary(f"by_type.{t}.wait.{s}"))
                            for t in ("interactive", "report") for s in ("p50", "p95")],
    "wrr": [(f"{q}.wait.{s}", summary(f"by_queue.{q}.wait.{s}")) for q in ("bulk", "email") for s in ("p50", "p95")],
    "concurrency-limit": [("utilization", summary("utilization"))],
    "keyed-rate-limit": [(f"{t}.wait.p95", summary(f"by_type.{t}.wait.p95"))
                         for t in ("acme-hook", "globex-hook", "anonymous-hook")],
    "poison-dlq": [("failed_attempts", summary("jobs.failed_attempts"))],
    "timeouts": [("failed_attempts", summary("jobs.failed_attempts")), ("timeout_attempts", attempts_with("timeout"))],
    "sigterm-grace": [("cutoff_attempts", attempts_with("cutoff")), ("latency.max", summary("latency.max"))],
    "sigkill-recovery": [("stalled", summary("jobs.stalled")), ("recovery.mean", recovery("mean", 10.7)),
                         ("recovery.max", recovery("max", 10.7)), ("latency.max", summary("latency.max"))],
    "flows-fanout": [(f"{t}.latency.p95", summary(f"by_type.{t}.latency.p95")) for t in ("invoice", "import", "row")],
    "bursty": [("wait.mean", summary("wait.mean"))],
    "scale-up": [("wait.max", summary("wait.max")), ("utilization", summary("utilization"))],
    "mixed-lengths": [(f"lookup.wait.{s}", summary(f"by_type.lookup.wait.{s}")) for s in ("p95", "max")],
}


def calibrated(s: Scenario, cal: dict[str, float]) -> Scenario:
    return replace(s, engine=replace(s.engine, fetch_overhead=cal["fetch_overhead"], ack_overhead=cal["ack_overhead"],
                                     start_delay=cal["start_delay"]))


def med(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None and not math.isnan(x)]
    return float(statistics.median(ys)) if ys else None


def fmt(v: float | None, w: int) -> str:
    return f"{'-' if v is None else format(v, '.4g'):>{w}}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="seeds per scenario (the scenario's seed, +1, ...)")
    ap.add_argument("--only", default="", help="comma-separated scenario names (default: the whole set)")
    ap.add_argument("--jobs", type=int, default=None, help="add only the first N jobs of each scenario")
    ap.add_argument("--no-probe", action="store_true",
                    help="keep the scenarios' own [engine] overheads and start delay (no calibration runs)")
    ap.add_argument("--json", action="store_true", help="print the rows as one JSON document at the end")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    names = [n for n in a.only.split(",") if n] or list(STANDARD)
    t_start = time.monotonic()
    rows: list[dict[str, Any]] = []
    cal: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="qsim-fidelity-") as tmp, RedisServer(Path(tmp)) as server:
        if not a.no_probe:
            cal = calibrate(server.url)
            print(f"# calibrated: fetch_overhead {cal['fetch_overhead'] * 1e3:.2f} ms, ack_overhead "
                  f"{cal['ack_overhead'] * 1e3:.2f} ms (saturated occupancy {cal['occupancy'] * 1e3:.2f} ms; the "
                  f"probe's light-load ack {cal['probe_ack_overhead'] * 1e3:.2f} ms), start_delay "
                  f"{cal['start_delay']:.2f} s", file=sys.stderr, flush=True)
        for name in names:
            base = builtin(name)
            if cal:
                base = calibrated(base, cal)
            per: dict[str, list[tuple[float | None, float | None, str]]] = {}
            tols: dict[str, Tolerance] = {}
            extras: dict[str, list[tuple[float | None, float | None]]] = {}
            for k in range(a.runs):
                s = replace(base, seed=base.seed + k)
                model = simulate(s, max_jobs=a.jobs)
                t = time.monotonic()
                engine = run_scenario(s, server.url, max_jobs=a.jobs)
                secs = time.monotonic() - t
                verdicts = check(model.summary, engine.summary, scenario=s)
                bad = [v.quantity for v in verdicts if v.verdict == "fail"]
                print(f"# {name} seed {s.seed}: engine {secs:.1f} s, lost {engine.summary['jobs']['lost']}, "
                      f"{'pass' if not bad else 'FAIL ' + ','.join(bad)}", file=sys.stderr, flush=True)
                for v in verdicts:
                    per.setdefault(v.quantity, []).append((v.model, v.engine, v.verdict))
                    tols[v.quantity] = v.tolerance
                for label, get in EXTRAS.get(name, []):
                    extras.setdefault(label, []).append((get(model), get(engine)))
            for q, vals in per.items():
                m, e = med([v[0] for v in vals]), med([v[1] for v in vals])
                passed = sum(v[2] == "pass" for v in vals)
                skipped = all(v[2] == "skip" for v in vals)
                if skipped:
                    verdict = "skip"
                elif q == "jobs.lost":
                    verdict = "pass" if passed == len(vals) else "FAIL"
                elif m is None or e is None:
                    verdict = "pass" if m is None and e is None else "FAIL"
                else:
                    verdict = "pass" if abs(e - m) <= tols[q].limit(m) + 1e-12 else "FAIL"
                rows.append({"scenario": name, "quantity": q, "model": m, "engine": e,
                             "ratio": e / m if m and e is not None else None,
                             "tolerance": "-" if skipped else tols[q].describe(unit_of(q)),
                             "verdict": verdict, "runs": f"{passed}/{len(vals)}", "checked": True})
            for label, vals in extras.items():
                m, e = med([v[0] for v in vals]), med([v[1] for v in vals])
                rows.append({"scenario": name, "quantity": label, "model": m, "engine": e,
                             "ratio": e / m if m and e is not None else None, "tolerance": "", "verdict": "",
                             "runs": "", "checked": False})
    where = ("calibrated here: fetch_overhead {:.2f} ms, ack_overhead {:.2f} ms, start_delay {:.2f} s".format(
        cal["fetch_overhead"] * 1e3, cal["ack_overhead"] * 1e3, cal["start_delay"]) if cal
        else "the scenarios' own [engine] settings")
    print(f"fidelity: {len(names)} scenarios x {a.runs} run(s), {time.monotonic() - t_start:.0f} s; {where}")
    print(f"\n{'scenario':<20}{'quantity':<26}{'model':>10}{'engine':>10}{'eng/mod':>9}  {'tolerance':<16}"
          f"{'verdict':<8}runs")
    last = None
    for r in rows:
        name = r["scenario"] if r["scenario"] != last else ""
        last = r["scenario"]
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        q = r["quantity"] if r["checked"] else f"  ({r['quantity']})"
        print(f"{name:<20}{q:<26}{fmt(r['model'], 10)}{fmt(r['engine'], 10)}{ratio:>9}  {r['tolerance']:<16}"
              f"{r['verdict']:<8}{r['runs']}".rstrip())
    checked = [r for r in rows if r["checked"] and r["verdict"] != "skip"]
    ok = [r for r in checked if r["verdict"] == "pass"]
    print(f"\n{len(ok)} of {len(checked)} checked quantities within tolerance"
          + ("" if len(ok) == len(checked) else ": out: " + ", ".join(
              f"{r['scenario']}/{r['quantity']}" for r in checked if r not in ok)))
    lost = [r for r in rows if r["quantity"] == "jobs.lost" and r["verdict"] != "pass"]
    print(f"jobs lost by the engine: {'none' if not lost else 'in ' + ', '.join(r['scenario'] for r in lost)}")
    if a.json:
        print(json.dumps({"calibration": cal, "runs": a.runs, "rows": rows}))
    return 0 if not lost else 1


if __name__ == "__main__":
    sys.exit(main())
