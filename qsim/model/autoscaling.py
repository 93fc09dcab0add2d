"""Autoscalers in a model run: the scenario's ``[[autoscalers]]`` polling their pools and acting on them.

Each autoscaled pool gets a controller (:mod:`qsim.autoscale`, the same code
the engine harness runs) that decides at its decision times
(:func:`~qsim.autoscale.build.decision_times`: from ``0`` on, every ``poll``
seconds, or for an HPA every ``sync`` seconds and, when KEDA scales it to
zero, every ``poll`` seconds too) while the run lasts. At a poll the controller sees an
:class:`~qsim.autoscale.observe.Observation` built from what a real one could
read at that moment, never the run's future:

- ``workers``: the pool's processes running or starting; ``ready``: running;
- ``list_length``: jobs waiting in the pool's queues; ``oldest_age``: ``now``
  minus the earliest enqueue among them; ``in_flight`` (only when the policy
  reads it): those waiting plus the attempts on the pool's queues logged and
  not ended by ``now`` (on any pool's slots, draining processes' too: what the
  engine's active list holds);
- over the last ``window`` seconds (measured only when the policy reads them,
  from the run's attempt log as it grows): the p95 of the waits (first
  attempt's start minus enqueue) of the jobs that started on the pool's
  queues, the arrival rate of the pool's queues' drawn jobs, and the mean and
  cv of the run times of the attempts that *ended* (end minus start, as the
  engine logs them).

A decision above the current count creates processes at once; each takes
work after its cold start, drawn from the pool's ``start_delay`` (the
``"start_delay"`` stream, :class:`~qsim.spec.workload.StartDelays`). A decision
below it stops processes (:meth:`~qsim.model.events.PoolEvents.stop`: those
still starting first, then the newest running with a SIGTERM and the
autoscaler's ``grace``, exactly as a ``sigterm`` event: jobs still running at
the deadline are cut off, counted, and handed back).

:class:`AutoscaledPools` is the run's :class:`~qsim.model.hooks.PoolHooks`
when the scenario has autoscalers: the pool events (:class:`PoolEvents`, which
do the starting and stopping) and the autoscalers driving them. The Summary
gains ``autoscaling``: per pool, the :class:`~qsim.autoscale.tally.Tally`
section (worker-seconds over ``[0, duration]``, scale events, flaps, cut
jobs, the workers over time).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd
from simpy.events import Event, Timeout

from qsim.autoscale.build import controller, decision_times, lagged_times, metric_lag, metric_stats, \
    needs_advice
from qsim.autoscale.hpa import Recommend
from qsim.autoscale.observe import Observation
from qsim.autoscale.tally import Tally
from qsim.model.attempts import AttemptLog
from qsim.model.context import PoolContext
from qsim.model.dispatch import Pool
from qsim.model.events import PoolEvents
from qsim.model.queues import Queues
from qsim.spec.scenario import AutoscalerSpec, Scenario
from qsim.spec.workload import StartDelays

__all__ = ["AutoscaledPools", "Autoscaling", "Recommenders", "ScaleContext", "extra_horizon"]

#: Per autoscaled pool (by name), the function giving ``qsim advise``'s recommendation for an observation.
Recommenders = Mapping[str, Recommend]


class ScaleContext(PoolContext, Protocol):
    """What the autoscalers read of a run besides the pools: its end and the waiting lines."""

    @property
    def done(self) -> Event:
        """Triggered when the run ends."""

    @property
    def queues(self) -> Queues:
        """The waiting lines (a lane's heap holds its waiting jobs)."""


def extra_horizon(scenario: Scenario) -> float:
    """Time a run may need beyond its horizon for the autoscalers to bring workers back after idling."""
    extra = 0.0
    for a in scenario.autoscalers:
        p = a.params()
        extra += (a.poll + float(p.get("sync") or 0.0) + a.grace + 50 * a.start_delay.mean
                  + float(p.get("cooldown") or 0.0) + float(p.get("initial_cooldown") or 0.0)
                  + float(p.get("scale_down_stabilization") or 0.0) + float(p.get("down_delay") or 0.0) + 1.0)
    return extra


class _Scaler:
    """One autoscaled pool: its controller, cold starts, window and tally."""

    def __init__(self, spec: AutoscalerSpec, pool: Pool, scenario: Scenario, seed: int,
                 recommend: Recommend | None, ctx: ScaleContext) -> None:
        self.spec, self.pool = spec, pool
        self.control = controller(spec, pool.spec, recommend=recommend, scenario=scenario)
        self.times = decision_times(self.control, spec)
        self.needs = self.control.needs
        self.delays = StartDelays(spec, seed)
        self.window = metric_stats(spec)
        self.lag = metric_lag(spec)
        self.taken: deque[tuple[float, Observation]] = deque()  # with a lag: (decision time, its metrics)
        self.tally = Tally(workers=pool.spec.workers, end=scenario.duration, flap_window=spec.flap_window)
        self.lanes = frozenset(pool.queues)
        self.arrivals: np.ndarray | None = None
        if "arrival_rate" in self.needs:
            jobs = ctx.jobs
            served = set(pool.spec.queues)
            types = np.asarray([j.queue in served for j in scenario.jobs], dtype=bool)
            kinds = np.asarray(jobs.type[:jobs.n], dtype=np.int64)
            self.arrivals = np.sort(np.asarray(jobs.enqueued[:jobs.n], dtype=np.float64)[types[kinds]]) \
                if jobs.n else np.zeros(0)


class Autoscaling:
    """The scenario's autoscalers during one run (see the module docstring).

    Args:
        ctx: the run (clock, jobs, pools, waiting lines).
        events: the pool processes they start and stop.
        log: the run's attempt log (the waits and run times of the window).
        recommend: per pool, ``qsim advise``'s recommendation (for ``qsim`` policies).

    Raises:
        ValueError: a policy scales on the recommendation and ``recommend`` has none for its pool.
    """

    def __init__(self, ctx: ScaleContext, events: PoolEvents, log: AttemptLog, scenario: Scenario, seed: int,
                 recommend: Recommenders | None = None) -> None:
        self.ctx, self.events, self.log, self.scenario = ctx, events, log, scenario
        by_name = {p.spec.name: p for p in ctx.pools}
        self.scalers: list[_Scaler] = []
        for spec in scenario.autoscalers:
            rec = (recommend or {}).get(spec.pool)
            if needs_advice(spec) and rec is None:
                raise ValueError(f"the {spec.policy} autoscaler of pool {spec.pool!r} needs qsim advise's "
                                 "recommendation: simulate(..., recommend={pool: LoadAdvisor(...)}) "
                                 "(qsim.advise.load), as qsim simulate and qsim autoscale do")
            self.scalers.append(_Scaler(spec, by_name[spec.pool], scenario, seed, rec, ctx))
        self.read_log = any(s.needs & {"p95_wait", "service", "in_flight"} for s in self.scalers)
        if self.read_log:  # records off: the log keeps each attempt's job and number only for this
            log.keep_jobs()
        self._row = 0  # the first attempt-log row not read yet
        self._open: list[int] = []  # rows read whose attempt had not ended then
        self._running: dict[int, int] = {}  # lane -> attempts logged and not ended at the last read

    def start(self) -> None:
        """Schedule every autoscaler's first poll, at 0 (and, with a ``metric_lag``, its metrics' readings)."""
        for scaler in self.scalers:
            if scaler.lag > 0:
                self.ctx.env.process(self._take_metrics(scaler))
            Timeout(self.ctx.env, next(scaler.times), scaler).callbacks.append(self._poll)

    def _take_metrics(self, s: _Scaler) -> Generator[Event, None, None]:
        """Take the metrics of each decision ``metric_lag`` seconds before it (at 0 for those sooner), on the
        schedule the engine harness takes them (:func:`~qsim.autoscale.build.lagged_times`)."""
        env = self.ctx.env
        for when, decision in lagged_times(s.control, s.spec):
            if decision is None:  # the decision itself: the poll's own event
                continue
            if when > env.now:
                yield Timeout(env, when - env.now)
            if self.ctx.done.triggered:
                return
            if self.read_log:
                self._read_log(env.now)
            s.taken.append((decision, self.observe(s, env.now, 0, 0)))

    # ------------------------------------------------------------------ the polls

    def _poll(self, event: Event) -> None:
        s = cast(_Scaler, event.value)
        ctx = self.ctx
        if ctx.done.triggered:
            return
        now = ctx.env.now
        starting, running = self.events.alive(s.pool)
        before = len(starting) + len(running)
        if self.read_log:
            self._read_log(now)
        after = s.control.decide(self._observation(s, now, before, len(running)))
        s.tally.polled(now, before, after)
        if after > before:
            self.events.launch(s.pool, s.delays.take(after - before), now, ready=self._ready_hook(s))
        elif after < before:
            _, stopped = self.events.stop(s.pool, before - after, now, s.spec.grace)
            if stopped:
                s.tally.readied(now, -stopped)
        Timeout(ctx.env, max(0.0, next(s.times) - now), s).callbacks.append(self._poll)

    @staticmethod
    def _ready_hook(s: _Scaler) -> Callable[[int, float], None]:
        return lambda w, now: s.tally.readied(now, 1)

    def _read_log(self, now: float) -> None:
        """Feed the windows the attempts started since the last poll and those that ended by now."""
        log, ctx = self.log, self.ctx
        enqueued = ctx.jobs.enqueued
        rows = range(self._row, len(log))
        self._row = len(log)
        still: list[int] = []
        running: dict[int, int] = {}
        for row in [*self._open, *rows]:
            lane = ctx.lane(log.job[row])
            new = row >= rows.start
            for s in self.scalers:
                if lane not in s.lanes:
                    continue
                if new and log.number[row] == 1 and "p95_wait" in s.needs:
                    s.window.started(log.start[row], log.start[row] - enqueued[log.job[row]])
                if "service" in s.needs and not math.isnan(log.end[row]) and log.end[row] <= now:
                    s.window.ended(log.end[row], log.end[row] - log.start[row])
            if math.isnan(log.end[row]) or log.end[row] > now:
                still.append(row)
                running[lane] = running.get(lane, 0) + 1
        self._open = still
        self._running = running

    def _observation(self, s: _Scaler, now: float, workers: int, ready: int) -> Observation:
        """The decision's observation: the metrics now, or those taken ``metric_lag`` s ago with today's counts."""
        if s.lag <= 0:
            return self.observe(s, now, workers, ready)
        while s.taken and s.taken[0][0] < now - 1e-9:
            s.taken.popleft()
        if not s.taken or s.taken[0][0] > now + 1e-9:  # not taken (cannot happen: taken first, at the latest now)
            return self.observe(s, now, workers, ready)
        return replace(s.taken.popleft()[1], now=now, workers=workers, ready=ready)

    def observe(self, s: _Scaler, now: float, workers: int, ready: int) -> Observation:
        """What the controller of ``s`` sees now (only the metrics it reads are measured)."""
        heaps = self.ctx.queues.heaps
        length = sum(len(heaps[q]) for q in s.pool.queues)
        oldest = 0.0
        if "oldest_age" in s.needs and length:
            enqueued = self.ctx.jobs.enqueued
            oldest = max(0.0, now - min(enqueued[job] for q in s.pool.queues for _, _, job in heaps[q]))
        in_flight = length + sum(self._running.get(q, 0) for q in s.pool.queues) if "in_flight" in s.needs else 0
        rate = mean = cv = None
        if s.arrivals is not None:
            span = min(s.window.window, now)
            n = int(np.searchsorted(s.arrivals, now, side="right")
                    - np.searchsorted(s.arrivals, now - s.window.window, side="right"))
            rate = n / span if span > 0 else 0.0
        if "service" in s.needs:
            measured = s.window.service(now)
            if measured is not None:
                mean, cv = measured
        p95 = s.window.p95_wait(now) if "p95_wait" in s.needs else None
        return Observation(now=now, workers=workers, ready=ready, list_length=length, in_flight=in_flight,
                           oldest_age=oldest,
                           p95_wait=p95, arrival_rate=rate, mean_service=mean, service_cv=cv)

    # ------------------------------------------------------------------ results

    def section(self, now: float) -> dict[str, Any]:
        """The Summary's ``autoscaling`` section at the end of the run."""
        out: dict[str, Any] = {}
        for s in self.scalers:
            procs = [w for w, p in enumerate(self.events.proc_pool) if p == s.pool.index]  # once, at the end
            entry = s.tally.section(now, [self.events.lifetimes[w] for w in procs])
            entry["cut_jobs"] = sum(int(r["jobs_cut_off"]) for r in self.events.drains
                                    if r["pool"] == s.pool.spec.name)
            entry["policy"] = s.spec.policy
            used = s.delays.drawn[:s.delays.used]
            entry["start_delays"] = {"drawn": s.delays.used, "mean": float(np.mean(used)) if used else None}
            out[s.pool.spec.name] = entry
        return out


class AutoscaledPools:
    """The run's pool hooks with autoscalers: :class:`PoolEvents` and the :class:`Autoscaling` driving them."""

    def __init__(self, ctx: ScaleContext, *, log: AttemptLog, scenario: Scenario, seed: int,
                 recommend: Recommenders | None = None) -> None:
        self.events = PoolEvents(ctx, log, scenario)
        self.autoscaling = Autoscaling(ctx, self.events, log, scenario, seed, recommend)
        self.retired = self.events.retired
        self.ctx = ctx

    @property
    def slot_steps(self) -> Sequence[tuple[float, int]]:
        """``(time, slots)`` at each change of the slot count."""
        return self.events.slot_steps

    @property
    def pool_steps(self) -> Mapping[str, Sequence[tuple[float, int]]]:
        """Per pool, ``(time, processes taking work)`` at each change."""
        return self.events.pool_steps

    def start(self) -> None:
        """The run starts: the pool events and the autoscalers' first polls."""
        self.events.start()
        self.autoscaling.start()

    def slot_done(self, slot: int, now: float) -> None:
        """An attempt ended on a retired slot."""
        self.events.slot_done(slot, now)

    def frame(self) -> pd.DataFrame:
        """``records.extra["drains"]``."""
        return self.events.frame()

    def section(self) -> dict[str, Any]:
        """The Summary's ``autoscaling`` section (at the run's end)."""
        return self.autoscaling.section(self.ctx.env.now)
