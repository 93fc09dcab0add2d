"""Autoscalers in a model run: the scenario's ``[[autoscalers]]`` polling their pools and acting on them.

Each autoscaled pool gets a controller (:mod:`qsim.autoscale`, the same code
the engine harness runs) that decides every ``poll`` seconds from ``0`` on,
while the run lasts. At a poll the controller sees an
:class:`~qsim.autoscale.observe.Observation` built from what a real one could
read at that moment, never the run's future:

- ``workers``: the pool's processes running or starting; ``ready``: running;
- ``list_length``: jobs waiting in the pool's queues; ``oldest_age``: ``now``
  minus the earliest enqueue among them;
- over the last ``window`` seconds (measured only when the policy reads them):
  the p95 of the waits (``start - enqueued``) of the attempts that started on
  the pool's queues, the arrival rate of the pool's queues' drawn jobs, and the
  mean and cv of the run times of the attempts that *ended* (an attempt's run
  time is counted once its end has passed).

A decision above the current count creates processes at once; each takes
work after its cold start, drawn from the pool's ``start_delay`` (the
``"start_delay"`` stream, :class:`~qsim.workload.StartDelays`). A decision
below it stops processes (:meth:`~qsim.model.events.PoolEvents.stop`: those
still starting first, then the newest running with a SIGTERM and the
autoscaler's ``grace``, exactly as a ``sigterm`` event: jobs still running at
the deadline are cut off, counted, and handed back).

The run's Summary gains ``autoscaling``: per pool, the
:class:`~qsim.autoscale.tally.Tally` section (worker-seconds over
``[0, duration]``, scale events, flaps, cut jobs, the workers over time).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

import numpy as np
import simpy
from simpy.events import Event, Timeout

from qsim.autoscale.build import controller, metric_window, needs_advice
from qsim.autoscale.hpa import Recommend
from qsim.autoscale.observe import Observation, WindowStats
from qsim.autoscale.tally import Tally
from qsim.model.core import Recorder
from qsim.model.dispatch import Pool
from qsim.model.events import PoolEvents
from qsim.model.queues import Queues
from qsim.model.state import JobTable
from qsim.scenario import AutoscalerSpec, Scenario
from qsim.workload import StartDelays

__all__ = ["Autoscaling", "Recommenders", "ScaleContext", "Watched"]

#: Per autoscaled pool (by name), the function giving ``qsim advise``'s recommendation for an observation.
Recommenders = Mapping[str, Recommend]


class ScaleContext(Protocol):
    """What the autoscalers read of a run: the clock, the jobs, the pools' waiting lines, each job's hold."""

    @property
    def env(self) -> simpy.Environment: ...

    @property
    def done(self) -> Event: ...

    @property
    def jobs(self) -> JobTable: ...

    @property
    def pools(self) -> Sequence[Pool]: ...

    @property
    def queues(self) -> Queues: ...

    @property
    def hold(self) -> array[float]: ...


class _Scaler:
    """One autoscaled pool: its controller, cold starts, window and tally."""

    def __init__(self, spec: AutoscalerSpec, pool: Pool, scenario: Scenario, seed: int,
                 recommend: Recommend | None, jobs: JobTable) -> None:
        self.spec, self.pool = spec, pool
        self.control = controller(spec, pool.spec, recommend=recommend)
        self.needs = self.control.needs
        self.delays = StartDelays(spec, seed)
        self.window = WindowStats(metric_window(spec))
        self.tally = Tally(workers=pool.spec.workers, end=scenario.duration, flap_window=spec.flap_window)
        self.lanes = frozenset(pool.queues)
        self.pending: list[tuple[float, float]] = []  # (end, run time) of attempts started, not yet ended
        self.arrivals: np.ndarray | None = None
        if "arrival_rate" in self.needs:
            served = {scenario.queue(q).name for q in pool.spec.queues}
            types = np.asarray([j.queue in served for j in scenario.jobs], dtype=bool)
            enqueued = np.asarray(jobs.enqueued[:jobs.n], dtype=np.float64)
            kinds = np.asarray(jobs.type[:jobs.n], dtype=np.int64)
            self.arrivals = np.sort(enqueued[types[kinds]]) if jobs.n else np.zeros(0)


class Autoscaling:
    """The scenario's autoscalers during one run (see the module docstring).

    Args:
        core: the run (clock, jobs, waiting lines, holds).
        events: the run's pool processes (they start and stop them).
        recommend: per pool, ``qsim advise``'s recommendation (for ``qsim`` policies).
    """

    def __init__(self, core: ScaleContext, events: PoolEvents, scenario: Scenario, seed: int,
                 recommend: Recommenders | None = None) -> None:
        self.core, self.events, self.scenario = core, events, scenario
        self.jobs: JobTable = core.jobs
        by_name = {p.spec.name: p for p in core.pools}
        self.scalers = []
        for spec in scenario.autoscalers:
            rec = (recommend or {}).get(spec.pool)
            if needs_advice(spec) and rec is None:
                raise ValueError(f"the {spec.policy} autoscaler of pool {spec.pool!r} needs qsim advise's "
                                 "recommendation: simulate(..., recommend={pool: LoadAdvisor(...)}) "
                                 "(qsim.advise.load), as qsim simulate and qsim autoscale do")
            self.scalers.append(_Scaler(spec, by_name[spec.pool], scenario, seed, rec, self.jobs))
        self.watch_starts = any(s.needs & {"p95_wait", "service"} for s in self.scalers)

    # ------------------------------------------------------------------ the run

    def start(self) -> None:
        """Schedule every autoscaler's first poll, at 0."""
        for scaler in self.scalers:
            Timeout(self.core.env, 0.0, scaler).callbacks.append(self._poll)

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        """An attempt started (the recorder's hook): its wait and, later, its run time count."""
        for s in self.scalers:
            if q in s.lanes:
                if "p95_wait" in s.needs:
                    s.window.started(now, now - self.jobs.enqueued[job])
                if "service" in s.needs:
                    run = self.core.hold[job]
                    heapq.heappush(s.pending, (now + run, run))

    def _poll(self, event: Event) -> None:
        s = cast(_Scaler, event.value)
        core = self.core
        if core.done.triggered:
            return
        now = core.env.now
        starting, running = self.events.alive(s.pool)
        before = len(starting) + len(running)
        after = s.control.decide(self.observe(s, now, before, len(running)))
        s.tally.polled(now, before, after)
        if after > before:
            self.events.launch(s.pool, s.delays.take(after - before), now, ready=self._ready_hook(s))
        elif after < before:
            cancelled, stopped = self.events.stop(s.pool, before - after, now, s.spec.grace)
            if cancelled or stopped:
                s.tally.readied(now, -stopped)
        Timeout(core.env, s.spec.poll, s).callbacks.append(self._poll)

    def _ready_hook(self, s: _Scaler) -> Callable[[int, float], None]:
        return lambda w, now: s.tally.readied(now, 1)

    def observe(self, s: _Scaler, now: float, workers: int, ready: int) -> Observation:
        """What the controller of ``s`` sees now (only the metrics it reads are measured)."""
        heaps = self.core.queues.heaps
        length = sum(len(heaps[q]) for q in s.pool.queues)
        oldest = 0.0
        if "oldest_age" in s.needs and length:
            enqueued = self.jobs.enqueued
            first = min(enqueued[job] for q in s.pool.queues for _, _, job in heaps[q])
            oldest = max(0.0, now - first)
        rate = mean = cv = None
        if "arrival_rate" in s.needs and s.arrivals is not None:
            span = min(s.window.window, now)
            n = int(np.searchsorted(s.arrivals, now, side="right") -
                    np.searchsorted(s.arrivals, now - s.window.window, side="right"))
            rate = n / span if span > 0 else 0.0
        if "service" in s.needs:
            while s.pending and s.pending[0][0] <= now:
                end, run = heapq.heappop(s.pending)
                s.window.ended(end, run)
            measured = s.window.service(now)
            if measured is not None:
                mean, cv = measured
        p95 = s.window.p95_wait(now) if "p95_wait" in s.needs else None
        return Observation(now=now, workers=workers, ready=ready, list_length=length, oldest_age=oldest,
                           p95_wait=p95, arrival_rate=rate, mean_service=mean, service_cv=cv)

    # ------------------------------------------------------------------ results

    def horizon(self) -> float:
        """Extra time a run may need for the autoscalers to bring workers back (added to its horizon)."""
        extra = 0.0
        for a in self.scenario.autoscalers:
            p = a.params()
            extra += a.poll + a.grace + 50 * a.start_delay.mean + float(p.get("cooldown") or 0.0) + \
                float(p.get("scale_down_stabilization") or 0.0) + float(p.get("down_delay") or 0.0) + 1.0
        return extra

    def section(self, now: float) -> dict[str, Any]:
        """The Summary's ``autoscaling`` section at the end of the run."""
        out: dict[str, Any] = {}
        for s in self.scalers:
            procs = [w for w, p in enumerate(self.events.proc_pool) if p == s.pool.index]  # once, at the end
            entry = s.tally.section(now, [self.events.lifetimes[w] for w in procs])
            entry["cut_jobs"] = sum(int(r["jobs_cut_off"]) for r in self.events.drains if r["pool"] == s.pool.spec.name)
            entry["policy"] = s.spec.policy
            entry["start_delays"] = {"drawn": s.delays.used,
                                     "mean": float(np.mean(s.delays.drawn[:s.delays.used])) if s.delays.used
                                     else None}
            out[s.pool.spec.name] = entry
        return out


class Watched:
    """A recorder that also tells the autoscalers of every attempt's start (their p95 and run times)."""

    def __init__(self, inner: Recorder, hook: Callable[[int, int, int, float], None]) -> None:
        self.inner, self.hook = inner, hook
        self.queued, self.every = inner.queued, inner.every

    def started(self, job: int, q: int, slot: int, now: float) -> None:
        self.inner.started(job, q, slot, now)
        self.hook(job, q, slot, now)

    def completed(self, job: int, slot: int, now: float) -> None:
        self.inner.completed(job, slot, now)

    def settled(self, job: int, outcome: int, now: float) -> None:
        self.inner.settled(job, outcome, now)

    def tick(self) -> None:
        self.inner.tick()
