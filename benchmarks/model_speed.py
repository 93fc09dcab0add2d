"""Model speed benchmark: qsim's model against idiomatic SimPy models, same run.

Two scenarios, each timed against the SimPy model a SimPy user would write for
it, fed the same drawn samples (arrival times, types, every attempt's service
time and failure flag; drawing them is not timed for SimPy, it is for qsim):

**M/M/c**: c = 10 and rho = 0.8 (lambda = 8/s, mean service 1 s), 10^6 jobs by
default. Contenders:

- ``qsim simulate(records=False)``: end to end (draws, run, Summary), keeping
  only streamed statistics — what sweeps use;
- ``qsim simulate(records=True)``: end to end with the per-job records
  (jobs DataFrame, attempts) and the Summary computed from them;
- the idiomatic pattern SimPy's documentation teaches: one process per job
  that requests a ``simpy.Resource`` of capacity c, computing the mean wait
  (less work than a Summary).

**Every mechanism** (:func:`everything`): one queue with a sliding-window rate
limit (12 starts per second) and a concurrency limit (12), two job types with
different priorities (``urgent`` 25% of arrivals at priority 1, ``bulk`` 75% at
priority 5; lower runs first), retries (10% of attempts fail, 3 attempts,
exponential backoff 0.5 s then 1 s), a pool of 4 processes x 4 slots and a
SIGTERM to one process half-way (it stops taking jobs; 60 s of grace, far
longer than any job, so nothing is cut off). lambda = 8/s, mean service 1 s.
The idiomatic SimPy model (:func:`idiomatic_everything`) is written the way
SimPy's docs teach: a process per job that, for each attempt, requests the
concurrency limit (a ``simpy.PriorityResource``, by the job's priority), then a
worker slot (a ``simpy.PriorityResource``), then a rate-limit token (a
``simpy.Container`` of ``max`` tokens; each start's token goes back ``per``
later through a small process: exactly the sliding window qsim models),
holds them for the attempt's service time, and after a failed attempt waits
its backoff as a ``timeout`` and tries again; the SIGTERM is a process that
takes the stopped process's slots with requests ahead of every job and never
gives them back (so they retire as they free up). It computes the mean wait
and counts completed and dead jobs and failed attempts; the two models agree
on those counts exactly (same draws) and on the mean wait closely (printed).
What it does not model, and qsim does: which process a slot belongs to (the
SIGTERM retires the next slots to free up, not that process's own), cut-offs
at the grace deadline and their hand-back to the front of the queue (none
happen here), the jobs blocked at the rate limit being restarted by priority
(the Container serves them first come, first served), attempt and job records,
the time series and a Summary.

Printed for each contender: median wall time over ``--runs`` rounds,
simulated jobs per second and peak memory (tracemalloc, one extra run each),
and the ratio to the idiomatic model. The contenders run in turn within each
round (the machine is shared and noisy), and the headline ratio is the
median of the per-round ratios. Targets: >= 3x idiomatic with records on, in
both scenarios.

**An autoscaled day** (:func:`autoscaled_day`): a 24-hour rate profile (linear
between hourly points, 5 to 34 jobs/s, a mean of 20.5 jobs/s: about 1.77
million jobs) of exponential 0.5 s jobs on a pool that an ``hpa`` autoscaler
scales on the queue's length (target 4 per worker, polls every 30 s, cold
starts of 30 s, 2 to 60 workers): records off, end to end. It runs in the same
rounds as the M/M/c model (records off, as many jobs) and the idiomatic SimPy
model on ``--baseline-jobs`` jobs, so its per-job speed is read against both
whatever else the machine is doing. Printed: the ratio of the day's per-job
time to M/M/c's (the median over rounds of each round's ratio: the machine is
shared and noisy, a ratio of two runs side by side is what holds), target
<= :data:`DAY_RATIO_TARGET` (so that ``qsim autoscale --tune`` with 5
replications of a few dozen candidates takes minutes), and the peak memory
of each (tracemalloc, one extra run). ``--snippet`` writes that report to
docs/snippets/benchmarks/model-speed-day.md.

Then peak memory at ``--jobs / 10`` and ``--jobs`` jobs with records on and
off (target: 10^6 M/M/c jobs with records on in <= 300 MB): records=False
stays nearly flat (what remains O(jobs) is the drawn jobs and the job-table
columns dispatch reads, see :mod:`qsim.model.recordless`).

Usage: ``python benchmarks/model_speed.py [--jobs 1000000] [--runs 3] [--baseline-jobs N]
[--only mmc|everything|day] [--snippet]`` (``--baseline-jobs`` runs the idiomatic models on
fewer jobs, reported per job: their cost is linear in the number of jobs).
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import simpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qsim import Scenario  # noqa: E402
from qsim.model import draw_jobs, simulate  # noqa: E402
from qsim.results.summary import STREAM_REL_ERROR  # noqa: E402
from qsim.spec.workload import draw_workload  # noqa: E402

C, LAM, MEAN = 10, 8.0, 1.0


def scenario(jobs: int) -> Scenario:
    """M/M/c, enough time for ``jobs`` arrivals."""
    return Scenario.from_dict({
        "name": "mmc-bench", "seed": 1, "duration": jobs / LAM * 1.05,
        "queues": [{"name": "q"}],
        "jobs": [{"name": "a", "queue": "q", "arrival": {"kind": "poisson", "rate": LAM},
                  "service": {"kind": "exponential", "mean": MEAN}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": C, "concurrency": 1}],
    })


def everything(jobs: int) -> Scenario:
    """Every mechanism: retries, a rate limit, a concurrency limit, two priorities, a SIGTERM."""
    duration = jobs / LAM * 1.05
    retry = {"fail_prob": 0.1, "attempts": 3, "backoff": {"kind": "exponential", "delay": 0.5, "max": 5.0}}
    return Scenario.from_dict({
        "name": "every-mechanism-bench", "seed": 1, "duration": duration,
        "queues": [{"name": "q", "rate_limit": {"max": 12, "per": 1.0}, "concurrency_limit": 12}],
        "jobs": [{"name": "urgent", "queue": "q", "priority": 1, "arrival": {"kind": "poisson", "rate": LAM / 4},
                  "service": {"kind": "exponential", "mean": MEAN}, **retry},
                 {"name": "bulk", "queue": "q", "priority": 5, "arrival": {"kind": "poisson", "rate": LAM * 3 / 4},
                  "service": {"kind": "exponential", "mean": MEAN}, **retry}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 4, "concurrency": 4}],
        "events": [{"at": duration / 2, "kind": "sigterm", "pool": "p", "count": 1, "grace": 60.0}],
    })


def idiomatic(times: np.ndarray, services: np.ndarray) -> float:
    """One SimPy process per job on a ``simpy.Resource``; returns the mean wait."""
    env = simpy.Environment()
    servers = simpy.Resource(env, capacity=C)
    waits: list[float] = []

    def job(arrival: float, service: float) -> Any:
        with servers.request() as req:
            yield req
            waits.append(env.now - arrival)
            yield env.timeout(service)

    def source() -> Any:
        for t, s in zip(times.tolist(), services.tolist()):
            yield env.timeout(t - env.now)
            env.process(job(t, s))

    env.process(source())
    env.run()
    return float(np.mean(waits))


class EverythingSamples:
    """The drawn samples of :func:`everything` as plain lists, for the idiomatic model (not timed)."""

    def __init__(self, s: Scenario, jobs: int) -> None:
        w = draw_workload(s, max_jobs=jobs)
        plan = w.attempts
        types = np.asarray(w.arrivals.type, dtype=np.int64)
        self.scenario = s
        self.times: list[float] = w.arrivals.time.tolist()
        self.types: list[int] = types.tolist()
        rank = plan.rank
        self.services: list[list[float]] = [[] for _ in self.types]
        self.fails: list[list[bool]] = [[] for _ in self.types]
        for k, table in enumerate(plan.own):
            if table is None:
                continue
            mine = np.flatnonzero(types == k)
            rows = rank[mine]
            svc = table.service[rows].tolist()
            bad = (table.fails[rows] | table.poison[rows, None]).tolist()
            for i, sv, f in zip(mine.tolist(), svc, bad):
                self.services[i], self.fails[i] = sv, f

    def __len__(self) -> int:
        return len(self.times)


def idiomatic_everything(d: EverythingSamples) -> dict[str, float]:
    """The every-mechanism scenario as SimPy's docs teach it (see the module docstring)."""
    s = d.scenario
    q, pool, sigterm = s.queues[0], s.pools[0], s.events[0]
    assert q.rate_limit is not None and q.concurrency_limit is not None
    env = simpy.Environment()
    limit = simpy.PriorityResource(env, capacity=q.concurrency_limit)
    slots = simpy.PriorityResource(env, capacity=pool.workers * pool.concurrency)
    tokens = simpy.Container(env, capacity=q.rate_limit.max, init=q.rate_limit.max)
    per = q.rate_limit.per
    priority = [j.priority for j in s.jobs]
    attempts = [j.attempts for j in s.jobs]
    backoff = [j.backoff for j in s.jobs]
    waits: list[float] = []
    count = {"completed": 0, "dead": 0, "failed_attempts": 0}

    def token_back() -> Any:  # a start's token leaves the window ``per`` later
        yield env.timeout(per)
        yield tokens.put(1)

    def job(arrival: float, k: int, services: list[float], fails: list[bool]) -> Any:
        prio, b = priority[k], backoff[k]
        for n in range(attempts[k]):
            with limit.request(priority=prio) as lim:
                yield lim
                with slots.request(priority=prio) as slot:
                    yield slot
                    yield tokens.get(1)
                    env.process(token_back())
                    if n == 0:
                        waits.append(env.now - arrival)
                    yield env.timeout(services[n])
            if not fails[n]:
                count["completed"] += 1
                return
            count["failed_attempts"] += 1
            if n + 1 < attempts[k]:
                delay = b.delay if b.kind == "fixed" else b.delay * 2.0 ** n
                yield env.timeout(min(delay, b.max))
        count["dead"] += 1

    def retire() -> Any:  # a slot of the stopped process: taken ahead of every job, never given back
        yield slots.request(priority=-math.inf)

    def stop() -> Any:
        yield env.timeout(sigterm.at)
        for _ in range(sigterm.count * pool.concurrency):
            env.process(retire())

    def source() -> Any:
        for t, k, sv, f in zip(d.times, d.types, d.services, d.fails):
            yield env.timeout(t - env.now)
            env.process(job(t, k, sv, f))

    env.process(source())
    env.process(stop())
    env.run()
    return {"mean_wait": float(np.mean(waits)), **count}


def wall(fn: Callable[[], Any]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def peak_mb(fn: Callable[[], Any]) -> float:
    """Peak traced memory (MB) of one run of ``fn`` (what it allocates and holds at once)."""
    gc.collect()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return peak


class Race:
    """What :func:`race` measured: per contender, its jobs/s in each round and its peak memory (MB)."""

    def __init__(self, text: str, rates: dict[str, list[float]], peaks: dict[str, float]) -> None:
        self.text, self.rates, self.peaks = text, rates, peaks


def race(title: str, contenders: dict[str, tuple[int, Callable[[], Any]]], base: str, runs: int) -> Race:
    """Time the contenders in turn, ``runs`` rounds; print the table against ``base`` (and return it)."""
    walls: dict[str, list[float]] = {k: [] for k in contenders}
    for r in range(runs):
        for name, (_, fn) in contenders.items():
            walls[name].append(wall(fn))
        print(f"{title} round {r + 1}/{runs}: " + ", ".join(f"{k.split(' (')[0]} {v[-1]:.2f}s"
                                                          for k, v in walls.items()), file=sys.stderr)
    rates = {k: [contenders[k][0] / w for w in ws] for k, ws in walls.items()}
    peaks = {k: peak_mb(fn) for k, (_, fn) in contenders.items()}
    lines = [f"{title}; median of {runs} interleaved rounds; peak memory by tracemalloc (one extra run)",
             f"{'':<48}{'jobs':>9}{'wall s':>9}{'jobs/s':>11}{'peak MB':>9}{'x idiomatic':>13}"]
    for name, (jobs, _) in contenders.items():
        ratio = statistics.median(x / y for x, y in zip(rates[name], rates[base]))
        lines.append(f"{name:<48}{jobs:>9}{statistics.median(walls[name]):>9.2f}"
                     f"{statistics.median(rates[name]):>11,.0f}{peaks[name]:>9.0f}{ratio:>12.2f}x")
    lines.append("x idiomatic: median over rounds of (jobs/s) / (idiomatic jobs/s of the same round); target >= 3x")
    text = "\n".join(lines)
    print("\n" + text)
    return Race(text, rates, peaks)


def mmc(n: int, nb: int, runs: int) -> None:
    big = scenario(n)
    base_draws = draw_jobs(scenario(nb), max_jobs=nb)
    nb = len(base_draws)
    base = "idiomatic SimPy (process/job + Resource)"
    race(f"M/M/{C}, rho = {LAM / (C / MEAN):.2f}", {
        "qsim simulate(records=False)": (n, lambda: simulate(big, max_jobs=n, records=False).summary),
        "qsim simulate(records=True)": (n, lambda: simulate(big, max_jobs=n, records=True).summary),
        base: (nb, lambda: idiomatic(base_draws.time, base_draws.service)),
    }, base, runs)

    exact = simulate(big, max_jobs=n, records=True).summary
    streamed = simulate(big, max_jobs=n, records=False).summary
    errors = [f"{what} {q} {abs(streamed[what][q] - exact[what][q]) / exact[what][q]:.3%}"
              for what in ("wait", "latency") for q in ("p50", "p95", "p99") if exact[what][q]]
    same = all(streamed[k] == exact[k] for k in ("jobs", "throughput")) and \
        streamed["by_queue"]["q"]["max_depth"] == exact["by_queue"]["q"]["max_depth"]
    print(f"records=False vs records=True, same seed: relative error {', '.join(errors)} "
          f"(bound {STREAM_REL_ERROR:.2%}); wait p50 exact 0 both: {exact['wait']['p50'] == streamed['wait']['p50']}; "
          f"counts, throughput, max_depth identical: {same}; mean wait differs by "
          f"{abs(streamed['wait']['mean'] - exact['wait']['mean']):.1e} s")


def every_mechanism(n: int, nb: int, runs: int) -> None:
    big = everything(n)
    samples = EverythingSamples(everything(nb), nb)
    nb = len(samples)
    base = "idiomatic SimPy (process/job + PriorityResource)"
    race("Every mechanism (retries, rate + concurrency limit, priorities, SIGTERM)", {
        "qsim simulate(records=False)": (n, lambda: simulate(big, max_jobs=n, records=False).summary),
        "qsim simulate(records=True)": (n, lambda: simulate(big, max_jobs=n, records=True).summary),
        base: (nb, lambda: idiomatic_everything(samples)),
    }, base, runs)
    ours = simulate(everything(nb), max_jobs=nb, records=True).summary
    theirs = idiomatic_everything(samples)
    print(f"same {nb} jobs, qsim vs idiomatic: completed {ours['jobs']['completed']} vs {theirs['completed']}, "
          f"dead {ours['jobs']['dead']} vs {theirs['dead']}, failed attempts {ours['jobs']['failed_attempts']} vs "
          f"{theirs['failed_attempts']}, mean wait {ours['wait']['mean']:.4f} s vs {theirs['mean_wait']:.4f} s")


#: The day's rate at each hour (jobs/s), repeated every 24 h.
DAY = (8, 6, 5, 5, 6, 8, 12, 18, 24, 28, 30, 32, 34, 32, 30, 28, 26, 26, 28, 30, 28, 22, 16, 10)


def day_scenario() -> Scenario:
    """24 h of the :data:`DAY` profile on an hpa-autoscaled pool (see the module docstring)."""
    return Scenario.from_dict({
        "name": "autoscaled-day", "duration": 86400.0, "queues": [{"name": "q"}],
        "jobs": [{"name": "j", "queue": "q", "service": {"kind": "exponential", "mean": 0.5},
                  "arrival": {"kind": "profile", "shape": "linear", "period": 86400.0,
                              "points": [[h * 3600, r] for h, r in enumerate(DAY)]}}],
        "pools": [{"name": "p", "queues": ["q"], "workers": 10}],
        "autoscalers": [{"pool": "p", "min": 2, "max": 60, "policy": "hpa", "metric": "list_length", "target": 4,
                         "poll": 30.0, "start_delay": {"kind": "constant", "mean": 30.0}}]})


#: Target: an autoscaled day's per-job time at most this many times M/M/c's (records off, same run).
DAY_RATIO_TARGET = 1.5


def autoscaled_day(nb: int, runs: int) -> str:
    """Race the autoscaled day against M/M/c (same jobs) and the idiomatic model; returns the report."""
    day = day_scenario()
    n = simulate(day, records=False).summary["jobs"]["arrived"]
    big = scenario(n)
    base_draws = draw_jobs(scenario(nb), max_jobs=nb)
    nb = len(base_draws)
    base = "idiomatic SimPy (process/job + Resource)"
    ours, mmc_name = "qsim autoscaled day simulate(records=False)", f"qsim M/M/{C} simulate(records=False)"
    r = race("An autoscaled day: 24 h profile, mean 20.5 jobs/s, hpa on list length", {
        ours: (n, lambda: simulate(day, records=False).summary),
        mmc_name: (n, lambda: simulate(big, max_jobs=n, records=False).summary),
        base: (nb, lambda: idiomatic(base_draws.time, base_draws.service)),
    }, base, runs)
    # per-job time ratio = (M/M/c jobs/s) / (day jobs/s), per round (the same machine state), then the median
    per_round = [m / d for d, m in zip(r.rates[ours], r.rates[mmc_name])]
    ratio = statistics.median(per_round)
    a = simulate(day, records=False).summary["autoscaling"]["p"]
    lines = [r.text,
             f"the day: {n:,} jobs, {a['scale_events']} scale events, workers {a['workers']['min']}.."
             f"{a['workers']['max']} (mean {a['workers']['mean']:.1f}), {a['worker_seconds'] / 3600:.0f} worker-hours",
             f"per-job time, autoscaled day / M/M/{C} (records off, same jobs): {ratio:.2f}x, the median of "
             f"{runs} rounds ({', '.join(f'{x:.2f}' for x in per_round)}); target <= {DAY_RATIO_TARGET}x: "
             f"{'met' if ratio <= DAY_RATIO_TARGET else 'NOT met'}",
             f"peak memory (tracemalloc), records off: the day {r.peaks[ours]:.0f} MB, M/M/{C} with as many jobs "
             f"{r.peaks[mmc_name]:.0f} MB"]
    print("\n".join(lines[1:]))
    return "\n".join(lines)


def memory(n: int) -> None:
    small = max(n // 10, 1)
    print(f"\npeak memory (MB, tracemalloc) by number of jobs\n{'':<44}{small:>12}{n:>12}")
    for label, make in (("M/M/c", scenario), ("every mechanism", everything)):
        for records in (True, False):
            row = []
            for jobs in (small, n):
                s = make(jobs)
                row.append(peak_mb(lambda: simulate(s, max_jobs=jobs, records=records).summary))
            print(f"{f'{label} simulate(records={records})':<44}{row[0]:>12.0f}{row[1]:>12.0f}")
    print("target: M/M/c with records on, 10^6 jobs, <= 300 MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--baseline-jobs", type=int, default=None, help="idiomatic run size (default: --jobs)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=("mmc", "everything", "day"), default=None, help="one scenario only")
    ap.add_argument("--no-memory-scaling", action="store_true", help="skip the 10x memory comparison")
    ap.add_argument("--snippet", action="store_true",
                    help="also write the autoscaled day's report for the docs, as Markdown in "
                         "docs/snippets/benchmarks/model-speed-day.md (docs/explanation/performance.md)")
    a = ap.parse_args()
    started = time.time()
    n = a.jobs
    nb = a.baseline_jobs or n
    if a.only in (None, "mmc"):
        mmc(n, nb, a.runs)
    if a.only in (None, "everything"):
        every_mechanism(n, nb, a.runs)
    if a.only in (None, "day"):
        report = autoscaled_day(nb, a.runs)
        if a.snippet:
            from benchmarks.snippet import write_snippet

            print(f"wrote {write_snippet('model-speed-day', f'```text{chr(10)}{report}{chr(10)}```', started=started)}")
    if not a.no_memory_scaling:
        memory(n)


if __name__ == "__main__":
    main()
