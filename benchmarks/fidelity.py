"""Fidelity of every mechanism: the standard scenario set on the model and on the engine, side by side.

1. Calibrate the engine's per-job overhead once on this machine (the probe of ``qsim calibrate
   --probe``: ``fetch_overhead`` and ``ack_overhead``), and put it in every scenario's ``[engine]``.
2. Run each standard scenario (``qsim scenarios``) on the model and on the real engine (worker
   processes, real time, real signals) with the same seed: the same jobs, attempts and failures.
3. Print the full table: per scenario the quantities ``qsim compare --check`` judges (p50/p95 wait
   and latency, throughput, dead, lost, unfinished) with model, engine, engine/model, tolerance and
   verdict, plus a few rows per mechanism (shown, not judged: per-type waits, stalled and cut-off
   attempts, recovery delays).

Target: every p50/p95 wait and latency within 10% (or 20 ms), throughput within 3%, dead, lost and
unfinished exact. With ``--runs R`` each scenario runs with R seeds (the scenario's, +1, ...) and
the table shows medians, the verdict the share of runs that passed.

A throwaway redis-server is started on a free port (never 6379). About 6 minutes for one run of
the set on a 2-core machine.

Usage: ``python benchmarks/fidelity.py [--runs 1] [--only steady,wrr] [--jobs N] [--no-probe] [--json]``
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

from qsim.analysis.check import Tolerance, check, unit_of  # noqa: E402
from qsim.analysis.compare import field_value  # noqa: E402
from qsim.calibrate import probe  # noqa: E402
from qsim.harness import RedisServer, run_scenario  # noqa: E402
from qsim.model import simulate  # noqa: E402
from qsim.scenario import Scenario  # noqa: E402
from qsim.scenarios import STANDARD, builtin  # noqa: E402

Extra = Callable[[Any], float | None]  # a run result (ModelResult or EngineResult) -> value


def summary(path: str) -> Extra:
    def get(r: Any) -> float | None:
        v = field_value(r.summary, path)
        return None if v is None else float(v)
    return get


def attempts_with(result: str) -> Extra:
    return lambda r: float((r.records.attempts["result"] == result).sum())


def recovery(stat: str) -> Extra:
    """Restart of each stalled job's next attempt minus the kill (the scenario's first sigkill)."""
    def get(r: Any) -> float | None:
        a = r.records.attempts.sort_values(["job_id", "attempt"])
        kill = next(e.at for e in r_scenario[0].events if e.kind == "sigkill")
        nxt = a.groupby("job_id")["start"].shift(-1)
        delays = (nxt[a["result"] == "stalled"] - kill).dropna().to_numpy()
        if not delays.size:
            return None
        return float(np.mean(delays) if stat == "mean" else np.max(delays))
    return get


r_scenario: list[Scenario] = []  # the scenario being measured (for extras that need it)

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
    "sigkill-recovery": [("stalled", summary("jobs.stalled")), ("recovery.mean", recovery("mean")),
                         ("recovery.max", recovery("max")), ("latency.max", summary("latency.max"))],
    "flows-fanout": [(f"{t}.latency.p95", summary(f"by_type.{t}.latency.p95")) for t in ("invoice", "import", "row")],
    "bursty": [("wait.mean", summary("wait.mean"))],
    "scale-up": [("wait.max", summary("wait.max")), ("utilization", summary("utilization"))],
}


def with_overhead(s: Scenario, fetch: float, ack: float) -> Scenario:
    return replace(s, engine=replace(s.engine, fetch_overhead=fetch, ack_overhead=ack))


def med(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None and not math.isnan(x)]
    return float(statistics.median(ys)) if ys else None


def fmt(v: float | None, w: int) -> str:
    return f"{'-' if v is None else format(v, '.4g'):>{w}}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="seeds per scenario (the scenario's seed, +1, ...)")
    ap.add_argument("--only", default="", help="comma-separated scenario names (default: the whole set)")
    ap.add_argument("--jobs", type=int, default=None, help="add only the first N jobs of each scenario")
    ap.add_argument("--no-probe", action="store_true", help="keep the scenarios' own [engine] overheads")
    ap.add_argument("--json", action="store_true", help="print the rows as one JSON document at the end")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    names = [n for n in a.only.split(",") if n] or list(STANDARD)
    t_start = time.monotonic()
    rows: list[dict[str, Any]] = []
    overhead = {"fetch_overhead": 0.0, "ack_overhead": 0.0}
    with tempfile.TemporaryDirectory(prefix="qsim-fidelity-") as tmp, RedisServer(Path(tmp)) as server:
        if not a.no_probe:
            o = probe(server.url)
            overhead = {"fetch_overhead": o.fetch_overhead, "ack_overhead": o.ack_overhead}
            print(f"# probe: fetch_overhead {o.fetch_overhead * 1e3:.2f} ms, ack_overhead {o.ack_overhead * 1e3:.2f} ms "
                  f"({o.n} jobs)", file=sys.stderr, flush=True)
        for name in names:
            base = builtin(name)
            if not a.no_probe:
                base = with_overhead(base, overhead["fetch_overhead"], overhead["ack_overhead"])
            per: dict[str, list[tuple[float | None, float | None, str]]] = {}
            tols: dict[str, Tolerance] = {}
            extras: dict[str, list[tuple[float | None, float | None]]] = {}
            for k in range(a.runs):
                s = replace(base, seed=base.seed + k)
                r_scenario[:] = [s]
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
                ratio = med([v[1] / v[0] if v[0] and v[1] is not None else None for v in vals])
                rows.append({"scenario": name, "quantity": q, "model": m, "engine": e, "ratio": ratio,
                             "tolerance": "-" if skipped else tols[q].describe(unit_of(q)),
                             "verdict": "skip" if skipped else ("pass" if passed == len(vals) else "FAIL")
                             if a.runs == 1 else f"{passed}/{len(vals)}", "checked": True})
            for label, vals in extras.items():
                m, e = med([v[0] for v in vals]), med([v[1] for v in vals])
                ratio = med([v[1] / v[0] if v[0] and v[1] is not None else None for v in vals])
                rows.append({"scenario": name, "quantity": label, "model": m, "engine": e, "ratio": ratio,
                             "tolerance": "", "verdict": "", "checked": False})
    print(f"fidelity: {len(names)} scenarios x {a.runs} run(s), {time.monotonic() - t_start:.0f} s; "
          f"overhead from the probe: fetch {overhead['fetch_overhead'] * 1e3:.2f} ms, "
          f"ack {overhead['ack_overhead'] * 1e3:.2f} ms")
    print(f"\n{'scenario':<20}{'quantity':<24}{'model':>10}{'engine':>10}{'eng/mod':>9}  {'tolerance':<16}verdict")
    last = None
    for r in rows:
        name = r["scenario"] if r["scenario"] != last else ""
        last = r["scenario"]
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        q = r["quantity"] if r["checked"] else f"  ({r['quantity']})"
        print(f"{name:<20}{q:<24}{fmt(r['model'], 10)}{fmt(r['engine'], 10)}{ratio:>9}  {r['tolerance']:<16}"
              f"{r['verdict']}".rstrip())
    checked = [r for r in rows if r["checked"] and r["verdict"] != "skip"]
    ok = [r for r in checked if r["verdict"] in ("pass", f"{a.runs}/{a.runs}")]
    print(f"\n{len(ok)} of {len(checked)} checked quantities within tolerance"
          + ("" if len(ok) == len(checked) else ": out: " + ", ".join(
              f"{r['scenario']}/{r['quantity']}" for r in checked if r not in ok)))
    lost = [r for r in rows if r["quantity"] == "jobs.lost" and r["engine"]]
    print(f"jobs lost by the engine: {sum(r['engine'] for r in lost) if lost else 0}")
    if a.json:
        print(json.dumps({"overhead": overhead, "runs": a.runs, "rows": rows}))
    return 0 if not lost else 1


if __name__ == "__main__":
    sys.exit(main())
