"""Live advice under a stepped load, and what a recomputation costs.

1. **Stepped load** (``--runs`` runs, medians): a Poisson producer at ``--rate`` jobs/s of exponential
   0.2 s jobs on 2 ``qsim worker`` processes x 2 (offered load ``rate x 0.2`` busy slots), watched by
   ``qsim advise --watch`` (window ``--window`` s, a round every window/6 s, SLO p95 wait <= 0.5 s).
   After two windows the rate doubles; once the recommendation rises, the recommended workers are
   started and the load runs two more windows. Printed: the recommendation over time, when it rose
   after the step (in windows), and the measured p95 wait of three stretches, as ratios to the
   SLO: *base* (before the step), *before scaling* (from the step to the new workers) and *after
   scaling* (two windows from when the new workers ran and the backlog was gone).
2. **CPU per recomputation**: ``qsim.advise.advise`` on an engine run of ``--cost-jobs`` jobs
   (exponential 20 ms jobs at 400/s on 2 workers x 8: a load of 8 busy slots), the median of 5 recomputations at the worker's budget
   (``WORKER_BUDGET``: 5 replications of 5,000 jobs, one process) and at ``qsim advise``'s default
   (auto replications of 10,000 jobs, here one process), for windows holding a quarter and all of
   the jobs, and how much of it is the calibration (reading and fitting) rather than the plan.

A throwaway redis-server is started (never 6379).

Usage: ``python benchmarks/advise.py [--quick] [--runs 3] [--window 30] [--rate 10] [--json]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import redis  # noqa: E402
from stepped_load import AdviceWatch, Producer, Workers, settled, waits  # noqa: E402

from qsim.advise import WORKER_BUDGET, advise  # noqa: E402
from qsim.calibrate import from_redis  # noqa: E402
from qsim.harness import RedisServer, run_scenario  # noqa: E402
from qsim.spec.scenario import Scenario  # noqa: E402

SLO, LIMIT, MEAN, CONCURRENCY, START = "p95_wait<=0.5", 0.5, 0.2, 2, 2


def _p95(x: np.ndarray) -> float:
    return float(np.percentile(x, 95)) if x.size else float("nan")


def stepped(url: str, rate: float, window: float, seed: int, folder: Path) -> dict[str, Any]:
    """One stepped-load run; returns the recommendation over time and the three p95 waits."""
    queue, prefix = "steps", f"step{seed}"
    every = max(2.0, window / 6)
    workers = Workers(url, queue, prefix, concurrency=CONCURRENCY, logdir=folder)
    producer = Producer(url, queue, prefix, rate=rate, mean=MEAN, seed=seed)
    watch = AdviceWatch(url, queue, prefix, slo=SLO, window=f"{window:g}s", every=every, out=folder / "a.toml")
    t_scaled = t_settled = t_rise = float("nan")
    recommended = START
    try:
        workers.start(START)
        producer.start()
        t0 = time.time()
        time.sleep(5)
        watch.start()
        time.sleep(2 * window - 5)
        base_rec = (watch.latest() or {}).get("recommended_workers") or START
        producer.rate = 2 * rate
        t_step = time.time()
        t_step_watch = time.monotonic() - watch.t0
        deadline = time.monotonic() + 3 * window
        while time.monotonic() < deadline:
            rise = next((t for t, d in watch.lines if t > t_step_watch and
                         (d.get("recommended_workers") or 0) > base_rec), None)
            if rise is not None:
                t_rise = rise - t_step_watch
                recommended = int(watch.latest()["recommended_workers"])  # type: ignore[index]
                break
            time.sleep(0.5)
        t_scaled = time.time()
        if recommended > START:
            workers.start(recommended - START)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not settled(url, queue, prefix, t_scaled, recommended):
            time.sleep(1.0)
        t_settled = time.time()
        time.sleep(2 * window)
        producer.stop()
        time.sleep(5)
    finally:
        producer.stop()
        code = watch.interrupt() if watch.proc is not None else None
        workers.stop()
    timeline = [{"t": round(t - (t_step_watch if t_step_watch else 0), 1), "recommended": d["recommended_workers"],
                 "arrival": d.get("arrival_rate"), "current": d.get("current_workers"),
                 "utilization": d.get("utilization"), "cpu_seconds": d.get("cpu_seconds")}
                for t, d in watch.lines]
    base = _p95(waits(url, queue, prefix, t0 + window, t_step))
    before = _p95(waits(url, queue, prefix, t_step, t_scaled))
    after = _p95(waits(url, queue, prefix, t_settled, t_settled + 2 * window))
    redis.Redis.from_url(url).flushdb()
    return {"timeline": timeline, "rise_after_step_s": t_rise, "rise_windows": t_rise / window,
            "base_recommended": base_rec, "recommended": recommended, "settle_s": t_settled - t_scaled,
            "p95_base": base, "p95_before": before,
            "p95_after": after, "watch_exit": code,
            "watch_cpu": [d["cpu_seconds"] for d in timeline if d["cpu_seconds"] is not None]}


def cost(url: str, jobs: int) -> list[dict[str, Any]]:
    """CPU seconds per recomputation on a queue of ``jobs`` measured jobs."""
    rate = 400.0
    s = Scenario.from_dict({
        "name": "cost", "seed": 1, "duration": jobs / rate, "queues": [{"name": "orders"}],
        "jobs": [{"name": "cut", "queue": "orders", "arrival": {"kind": "poisson", "rate": rate},
                  "service": {"kind": "exponential", "mean": 0.02}}],
        "pools": [{"name": "shop", "queues": ["orders"], "workers": 2, "concurrency": 8}]})
    run = run_scenario(s, url, keep=True)
    enq = from_redis(url, "orders", prefix=run.prefix).measured.jobs["enqueued"]
    first, last = float(enq.min()), float(enq.max())
    rows = []
    for share in (0.25, 1.0):
        for label, budget in (("worker", dict(WORKER_BUDGET)),
                              ("cli", {"replications": "auto", "jobs_per_run": 10_000, "processes": 1})):
            cpu, wall, plan_runs, n, fit = [], [], [], 0, []
            for _ in range(5):
                window = f"{time.time() - (last - share * (last - first)) + 0.5:.3f}s"  # the last `share` of the jobs
                c0 = time.process_time()
                from_redis(url, "orders", prefix=run.prefix, since=window)
                fit.append(time.process_time() - c0)
                t = time.monotonic()
                a = advise(url, "orders", SLO, prefix=run.prefix, window=window, **budget)
                wall.append(time.monotonic() - t)
                cpu.append(a.cpu_seconds)
                plan_runs.append(a.search["runs"])
                n = int(a.measured["jobs"])
            rows.append({"budget": label, "window_jobs": n, "cpu_s": statistics.median(cpu),
                         "calibrate_cpu_s": statistics.median(fit),
                         "wall_s": statistics.median(wall), "model_runs": statistics.median(plan_runs),
                         "recommended": a.recommended_workers})
    redis.Redis.from_url(url).flushdb()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--window", type=float, default=30.0, help="advice window in seconds (default 30)")
    p.add_argument("--rate", type=float, default=10.0, help="base arrival rate, jobs/s (default 10)")
    p.add_argument("--cost-jobs", type=int, default=20_000)
    p.add_argument("--quick", action="store_true", help="one run, window 15 s, 4,000 jobs for the cost")
    p.add_argument("--only", choices=("step", "cost"), help="run only the stepped load or only the cost")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.quick:
        a.runs, a.window, a.cost_jobs = 1, 15.0, 4000
    with tempfile.TemporaryDirectory(prefix="qsim-bench-advise-") as tmp:
        server = RedisServer(Path(tmp) / "redis").start()
        try:
            runs = [stepped(server.url, a.rate, a.window, seed, Path(tmp)) for seed in range(1, a.runs + 1)] \
                if a.only != "cost" else []
            costs = cost(server.url, a.cost_jobs) if a.only != "step" else []
        finally:
            server.stop()
    med = {k: statistics.median(r[k] for r in runs) for k in ("rise_windows", "p95_base", "p95_before",
                                                             "p95_after")} if runs else {}
    watch_cpu = [c for r in runs for c in r["watch_cpu"]]
    doc = {"runs": runs, "median": med, "cost": costs,
           "watch_cpu_median": statistics.median(watch_cpu) if watch_cpu else None}
    if a.json:
        print(json.dumps(doc, indent=2, default=float))
        return
    if runs:
        print_runs(a, runs, med, watch_cpu)
    if costs:
        print_costs(costs)


def print_runs(a: argparse.Namespace, runs: list[dict[str, Any]], med: dict[str, float],
               watch_cpu: list[float]) -> None:
    print(f"stepped load: {a.rate:g} -> {2 * a.rate:g} jobs/s of exponential {MEAN} s jobs, workers x {CONCURRENCY}, "
          f"SLO {SLO}, window {a.window:g} s, {a.runs} run(s)")
    for i, r in enumerate(runs, 1):
        print(f"\nrun {i}: recommendation over time (t from the step, s):")
        for row in r["timeline"]:
            print(f"  t {row['t']:>7.1f}  recommended {row['recommended']}  arrival {row['arrival'] or 0:6.2f}/s  "
                  f"seen {row['current']} workers  utilization {row['utilization'] or 0:.2f}")
        print(f"  rose {r['rise_after_step_s']:.1f} s after the step ({r['rise_windows']:.2f} windows): "
              f"{r['base_recommended']} -> {r['recommended']} workers")
        print(f"  p95 wait: base {r['p95_base']:.3f} s, before scaling {r['p95_before']:.3f} s, after scaling "
              f"{r['p95_after']:.3f} s  (SLO {LIMIT} s; the new workers ran and the backlog was gone "
              f"{r['settle_s']:.1f} s after they were started; watch exit {r['watch_exit']})")
    print(f"\nmedians: rise after {med['rise_windows']:.2f} windows; p95 wait / SLO: base "
          f"{med['p95_base'] / LIMIT:.2f}, before scaling {med['p95_before'] / LIMIT:.2f}, after scaling "
          f"{med['p95_after'] / LIMIT:.2f}")
    print(f"watch rounds: median {statistics.median(watch_cpu):.2f} CPU s per recomputation ({len(watch_cpu)} "
          "printed rounds)")


def print_costs(costs: list[dict[str, Any]]) -> None:
    print("\nCPU per recomputation (median of 5):")
    print(f"  {'budget':<7} {'jobs in window':>14} {'CPU s':>7} {'of which calibrate':>18} {'wall s':>7} "
          f"{'model runs':>10}  recommended")
    for c in costs:
        print(f"  {c['budget']:<7} {c['window_jobs']:>14,} {c['cpu_s']:>7.2f} {c['calibrate_cpu_s']:>18.2f} "
              f"{c['wall_s']:>7.2f} {c['model_runs']:>10}  {c['recommended']}")


if __name__ == "__main__":
    main()
