"""Calibrate round trips: fitted vs true parameters, and predicted vs measured at two other concurrencies.

For each workload and seed:

1. run it on the real system at the calibration concurrency: the qsim engine (worker processes,
   :func:`qsim.harness.run.run_scenario`) or a real BullMQ (Node.js, ``tests/node/worker.js``);
2. calibrate from that Redis (:func:`qsim.calibrate.from_redis` / :func:`~qsim.calibrate.from_bullmq`)
   and print the fitted parameters beside the true ones;
3. run the same workload (same seed: the same jobs) at two other concurrencies on the real system,
   predict each with the model from the calibrated scenario (mean of ``--reps`` replications with
   the model's own random draws) and print predicted vs measured with their ratio.

Workloads:

* ``mixed``    bursts of 20 jobs every 0.5 s (lognormal 40 ms) + Poisson 10/s (exponential 50 ms);
               calibrated at 2x4 slots, predicted at 2x2 and 1x3;
* ``poisson``  one Poisson type, 60/s, lognormal 50 ms cv 0.8 (offered load 3); calibrated at 2x4,
               predicted at 2x2 (rho 0.75) and 1x5 (rho 0.6) — here a prediction is only as good as the
               measured rate and mean allow: at rho 0.75 a 2% error in the load moves waits ~8%;
* ``bullmq``   the ``mixed`` shape on BullMQ 5 (bursts of 10 every 0.5 s, lognormal 80 ms; Poisson 20/s,
               gamma 50 ms cv 0.3), concurrency 6 calibrated, 4 and 3 predicted (mean wait, as the
               issue asks, plus p50/p95).

Figures are medians over ``--runs`` seeds. A throwaway redis-server is started (never 6379).

Usage: ``python benchmarks/calibrate.py [--quick] [--runs 3] [--duration 30] [--only mixed,poisson,bullmq] [--json]``
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import redis  # noqa: E402

import qsim.calibrate as cal  # noqa: E402
from qsim.harness import RedisServer, run_scenario  # noqa: E402
from qsim.model import simulate  # noqa: E402
from qsim.spec.scenario import Scenario  # noqa: E402

STATS = (("wait", "mean"), ("wait", "p50"), ("wait", "p95"), ("latency", "p50"), ("latency", "p95"))


def mixed(workers: int, conc: int, seed: int, duration: float) -> Scenario:
    return Scenario.from_dict({
        "name": "mixed", "seed": seed, "duration": duration, "queues": [{"name": "orders"}],
        "jobs": [{"name": "bulk", "queue": "orders", "arrival": {"kind": "burst", "rate": 40.0, "size": 20},
                  "service": {"kind": "lognormal", "mean": 0.04, "cv": 0.5}},
                 {"name": "cut", "queue": "orders", "arrival": {"kind": "poisson", "rate": 10.0},
                  "service": {"kind": "exponential", "mean": 0.05}}],
        "pools": [{"name": "shop", "queues": ["orders"], "workers": workers, "concurrency": conc}]})


def poisson(workers: int, conc: int, seed: int, duration: float) -> Scenario:
    return Scenario.from_dict({
        "name": "poisson", "seed": seed, "duration": duration, "queues": [{"name": "orders"}],
        "jobs": [{"name": "cut", "queue": "orders", "arrival": {"kind": "poisson", "rate": 60.0},
                  "service": {"kind": "lognormal", "mean": 0.05, "cv": 0.8}}],
        "pools": [{"name": "shop", "queues": ["orders"], "workers": workers, "concurrency": conc}]})


ENGINE = {"mixed": (mixed, (2, 4), [(2, 2), (1, 3)]), "poisson": (poisson, (2, 4), [(2, 2), (1, 5)])}
BQ_TYPES = [{"name": "bulk", "arrival": "burst", "rate": 20, "size": 10}, {"name": "cut", "rate": 20}]
BQ_SERVICE = {"bulk": {"kind": "lognormal", "mean": 0.08, "cv": 0.5}, "cut": {"kind": "gamma", "mean": 0.05, "cv": 0.3}}
BQ_RATE = {"bulk": 20.0, "cut": 20.0}


def predict(s: Scenario, workers: int, conc: int, reps: int) -> dict[str, float]:
    at = replace(s, pools=tuple(replace(p, workers=workers, concurrency=conc) for p in s.pools))
    runs = [simulate(replace(at, seed=1000 + i), records=False).summary for i in range(reps)]
    out = {f"{m}.{q}": float(np.mean([r[m][q] for r in runs])) for m, q in STATS}
    out["throughput"] = float(np.mean([r["throughput"] for r in runs]))
    return out


def measured_of(summary: dict[str, Any]) -> dict[str, float]:
    return {**{f"{m}.{q}": float(summary[m][q]) for m, q in STATS}, "throughput": float(summary["throughput"])}


def fitted_rows(c: cal.Calibration, truth: Scenario) -> list[dict[str, Any]]:
    rows = []
    for name, f in c.types.items():
        t = truth.job(name)
        rows.append({"type": name, "true_arrival": f"{t.arrival.kind} {t.arrival.rate:g}/s",  # type: ignore[union-attr]
                     "fit_arrival": f"{f.arrival.kind} {f.arrival.rate:.4g}/s",
                     "true_service": f"{t.service.kind} {t.service.mean:g}",
                     "fit_service": f"{f.service.kind} {f.service.mean:.4g} cv {f.service.cv:.3g}",
                     "rate_ratio": f.arrival.rate / t.arrival.rate,  # type: ignore[union-attr]
                     "mean_ratio": f.service.mean / t.service.mean})
    return rows


def engine_case(name: str, url: str, seed: int, duration: float, reps: int) -> dict[str, Any]:
    build, (w1, c1), others = ENGINE[name]
    truth = build(w1, c1, seed, duration)
    first = run_scenario(truth, url, keep=True)
    c = cal.from_redis(url, ["orders"], prefix=first.prefix)
    redis.Redis.from_url(url).flushdb()
    out: dict[str, Any] = {"fits": fitted_rows(c, truth), "overhead": c.overhead.as_dict(), "points": []}
    for w, k in others:
        measured = measured_of(run_scenario(build(w, k, seed, duration), url).summary)
        out["points"].append({"slots": f"{w}x{k}", "predicted": predict(c.scenario, w, k, reps), "measured": measured})
    return out


def bullmq_summary(c: cal.Calibration) -> dict[str, float]:
    j = c.measured.jobs
    wait = (j["started"] - j["enqueued"]).dropna().to_numpy()
    done = j[j["outcome"] == "completed"]
    lat = (done["finished"] - done["enqueued"]).to_numpy()
    out = {"wait.mean": float(wait.mean()), "wait.p50": float(np.percentile(wait, 50)),
           "wait.p95": float(np.percentile(wait, 95)), "latency.p50": float(np.percentile(lat, 50)),
           "latency.p95": float(np.percentile(lat, 95))}
    out["throughput"] = len(done) / float(done["finished"].max() - j["enqueued"].min())
    return out


def bullmq_case(url: str, seed: int, duration: float, reps: int) -> dict[str, Any]:
    from bullmq_node import BullMQ

    bq = BullMQ("5")

    def run(queue: str, conc: int) -> cal.Calibration:
        with bq.worker(url, queue, concurrency=conc, name="shop-0", service=BQ_SERVICE, seed=seed):
            out = bq.produce(url, queue, types=BQ_TYPES, duration=duration, seed=seed)
            assert bq.wait_drained(url, queue, expected=out["added"], timeout=120)
        return cal.from_bullmq(url, queue)

    c = run("calib", 6)
    rows = []
    for name, f in c.types.items():
        spec = BQ_SERVICE[name]
        rows.append({"type": name, "true_arrival": f"{'burst' if name == 'bulk' else 'poisson'} {BQ_RATE[name]:g}/s",
                     "fit_arrival": f"{f.arrival.kind} {f.arrival.rate:.4g}/s",
                     "true_service": f"{spec['kind']} {spec['mean']:g}",
                     "fit_service": f"{f.service.kind} {f.service.mean:.4g} cv {f.service.cv:.3g}",
                     "rate_ratio": f.arrival.rate / BQ_RATE[name], "mean_ratio": f.service.mean / spec["mean"]})
    out: dict[str, Any] = {"fits": rows, "overhead": c.overhead.as_dict(), "points": []}
    for conc in (4, 3):
        m = bullmq_summary(run(f"at{conc}", conc))
        out["points"].append({"slots": f"1x{conc}", "predicted": predict(c.scenario, 1, conc, reps), "measured": m})
    redis.Redis.from_url(url).flushdb()
    return out


def med(xs: list[float]) -> float:
    ys = [x for x in xs if x is not None and math.isfinite(x)]
    return float(statistics.median(ys)) if ys else math.nan


def report(name: str, results: list[dict[str, Any]]) -> None:
    print(f"\n== {name}: fitted vs true (median of {len(results)} runs)")
    print(f"{'type':<6}{'true arrival':<18}{'fitted arrival':<22}{'rate fit/true':>14}   "
          f"{'true service':<20}{'fitted service':<30}{'mean fit/true':>14}")
    for i, row in enumerate(results[0]["fits"]):
        rr = med([r["fits"][i]["rate_ratio"] for r in results])
        mr = med([r["fits"][i]["mean_ratio"] for r in results])
        print(f"{row['type']:<6}{row['true_arrival']:<18}{row['fit_arrival']:<22}{rr:>14.3f}   "
              f"{row['true_service']:<20}{row['fit_service']:<30}{mr:>14.3f}")
    o = results[0]["overhead"]
    print(f"overhead (first run): fetch {o['fetch_overhead'] * 1e3:.2f} ms, ack {o['ack_overhead'] * 1e3:.2f} ms "
          f"({o['source']}, n={o['n']})")
    print(f"\n== {name}: predicted (model from the calibration) vs measured")
    print(f"{'slots':<7}{'metric':<14}{'predicted':>11}{'measured':>11}{'pred/meas':>11}")
    for i, point in enumerate(results[0]["points"]):
        for key in point["measured"]:
            p = med([r["points"][i]["predicted"][key] for r in results])
            m = med([r["points"][i]["measured"][key] for r in results])
            ratio = med([r["points"][i]["predicted"][key] / r["points"][i]["measured"][key] for r in results
                         if r["points"][i]["measured"][key]])
            print(f"{point['slots']:<7}{key:<14}{p:>11.4g}{m:>11.4g}{ratio:>11.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="seeds per workload (default 3)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals per run (default 30)")
    ap.add_argument("--reps", type=int, default=8, help="model replications per prediction (default 8)")
    ap.add_argument("--quick", action="store_true", help="1 run of 10 s each")
    ap.add_argument("--only", default="mixed,poisson,bullmq", help="workloads to run (comma-separated)")
    ap.add_argument("--json", action="store_true", help="also print every figure as JSON")
    a = ap.parse_args(argv)
    runs, duration = (1, 10.0) if a.quick else (a.runs, a.duration)
    wanted = [w for w in a.only.split(",") if w]
    results: dict[str, list[dict[str, Any]]] = {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="qsim-bench-") as tmp, RedisServer(Path(tmp)) as server:
        for name in wanted:
            for r in range(runs):
                seed = 11 + r
                print(f"[{time.monotonic() - t0:6.0f} s] {name} seed {seed}", file=sys.stderr)
                if name == "bullmq":
                    from bullmq_node import node_missing

                    if node_missing():
                        print(f"skipping bullmq: {node_missing()}", file=sys.stderr)
                        break
                    results.setdefault(name, []).append(bullmq_case(server.url, seed, duration, a.reps))
                else:
                    results.setdefault(name, []).append(engine_case(name, server.url, seed, duration, a.reps))
    for name, res in results.items():
        report(name, res)
    if a.json:
        print(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
