"""Pool events: crashes and stalled recovery, graceful shutdown under load, scale-up.

``[[events]]`` happen at their ``at`` (in file order at equal times) to
``count`` running processes of the pool (not yet signalled), chosen as the
engine harness chooses them: ``sigterm`` the first started (a rollout's
order), ``sigkill`` those holding the most jobs, the first started among
equals (the kernel's OOM killer takes the largest process, and a worker grows
with the jobs it holds; a crash of an idle process would show nothing to
recover). Each process has
``concurrency`` slots; a slot that a process can no longer use is *retired*
(never handed out again). ``Records.slots`` steps down by the process's slots
when it is signalled (``sigterm`` or ``sigkill``) and up when ``start`` adds
processes, as the harness records them.

``sigkill`` (a crash): the process's slots retire at once; each attempt it
was running stops then, but its job keeps its lock — and its place under the
queue's ``concurrency_limit`` and in the queue's ``active`` count — until a
stalled check finds the lock expired. Its attempt is logged ``stalled`` and
ends then (as the engine logs it: the job was active until then), so busy
time and ``active`` include the wait for the lock. The engine's timing
(:mod:`qsim.engine.maintenance`), mirrored exactly:

- *lock expiry*: a fetch locks a job for ``lock_duration`` (L); each process
  renews the locks it holds every ``L / 2``, its renewal task starting with
  the process (renewals at ``s + L/2, s + L, ...`` for a process started at
  ``s``: 0 for the initial processes, the event's ``at`` for a ``start``). A
  job fetched at ``f`` and held at the kill ``K`` has its lock expire at
  ``max(f, r) + L``, ``r`` the process's last renewal at or before ``K``:
  between ``L/2`` and ``L`` after the kill;
- *stalled checks*: every live process checks its queues when it starts and
  every ``stalled_interval`` (S) after; processes started together check
  together, so the model runs one checker per pool and start time, at
  ``s, s + S, s + 2S, ...`` exactly, while any of those processes lives. A
  check at ``t`` finds every lock that expired at or before ``t``.

So a job is back ``max(f, r) + L - K`` plus the wait for the next check
after the kill (L = 2, S = 1, a kill at 4.05 of a process started at 0: lock
renewed at 4.0, expired at 6.0, found by the check at 6.0: back after 1.95
s; the bound is ``L + S``). When an expiry falls exactly on a check (``L/2``
and ``S`` commensurate, as with the defaults 30/30), the engine finds the job
at that check or at the next one, by milliseconds of start-up skew between
its processes; the model finds it at that check. A check puts back every job
whose lock has run out (``stalled + 1``), in the order their locks expired,
to the *front* of its priority level (``recover_stalled.lua``), or to the
DLQ when it has now stalled more than ``max_stalled`` times. A stall does not
use up an attempt, and a cut-off (below) is not a stall (the engine's
``release.lua`` counts neither). Killed processes never come back; ``start``
adds new ones.

``sigterm`` (graceful shutdown): the process stops fetching at once (its free
slots retire); its running attempts run on. When the last one ends it has
drained; at ``at + grace`` the attempts still running are cut off (logged
``cutoff``, not using up an attempt) and their jobs handed back to the queue
at once (``release.lua``: waiting, at the *front* of their priority level in
the order they started, the concurrency limit freed), where other processes pick them up. Each
signalled process gets one row in ``records.extra["drains"]``: ``pool,
process, signalled_at, drained_at, cut_off_at, jobs_cut_off, active_at_signal``
(``drained_at`` NaN when cut off, ``cut_off_at`` NaN when drained) — the
distribution of ``drained_at - signalled_at`` is what grace-period advice is
made from.

``start``: ``count`` new processes join the pool (named on from the pool's
last one) and take work ``[engine] start_delay`` after the event (their
start-up; 0 by default: at once); the slot count steps up then, as the
harness records it when the processes report ready.

An autoscaler (:mod:`qsim.model.autoscaling`) uses the same processes:
:meth:`PoolEvents.launch` creates processes that take work after their own
cold start, :meth:`PoolEvents.stop` stops some of a pool's processes the way
Kubernetes picks the pods of a scale-down — those still starting first (they
just go), then the newest running ones (a SIGTERM with ``grace``, exactly as
a ``sigterm`` event). ``lifetimes`` says when each process was created and
when it ended (its cost).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator
from typing import Any, cast

import pandas as pd
from simpy.events import Event, Timeout

from qsim.model.attempts import CUTOFF, STALLED, AttemptLog
from qsim.model.context import PoolContext
from qsim.model.dispatch import Pool
from qsim.model.schedule import exact_delay
from qsim.model.state import DEAD
from qsim.spec.scenario import EventSpec, Scenario

__all__ = ["PoolEvents", "DRAIN_COLUMNS"]

#: A lock that expires within this of a check counts as expired at it (k * L/2 + L and m * S in floats).
_TIE = 1e-9
DRAIN_COLUMNS = ("pool", "process", "signalled_at", "drained_at", "cut_off_at", "jobs_cut_off", "active_at_signal")
RUNNING, DRAINING, GONE, STARTING = 0, 1, 2, 3


class PoolEvents:
    """Processes, their slots and the scenario's events during one model run.

    The run's :class:`~qsim.model.hooks.PoolHooks`: ``retired`` (per slot) and
    :meth:`slot_done` are what the core asks as an attempt ends. ``log``: the
    run's attempt log (stalls and cut-offs finish their rows).
    """

    def __init__(self, ctx: PoolContext, log: AttemptLog, scenario: Scenario) -> None:
        self.ctx = ctx
        self.scenario = scenario
        self.log, self.row_of = log, log.row_of
        self.proc_pool: list[int] = []
        self.proc_slots: list[list[int]] = []
        self.state: list[int] = []
        for p in ctx.pools:
            for w in range(p.spec.workers):
                self.proc_pool.append(p.index)
                self.proc_slots.append([p.slots[0] + w * p.spec.concurrency + c for c in range(p.spec.concurrency)])
                self.state.append(RUNNING)
        self.proc_start = [0.0] * len(self.state)  # when each process started (its renewals and checks count from it)
        self.local = [p.spec.workers for p in ctx.pools]  # processes each pool has started
        self.retired = [False] * ctx.n_slots  # slots of a signalled process: never handed out again
        self.slot_steps: list[tuple[float, int]] = [(0.0, ctx.n_slots)]
        #: per pool, its processes taking work as (time, count) steps (``Records.workers``)
        self.pool_steps: dict[str, list[tuple[float, int]]] = {p.spec.name: [(0.0, p.spec.workers)] for p in ctx.pools}
        self.drains: list[dict[str, Any]] = []
        self.draining: dict[int, tuple[set[int], int]] = {}  # process -> (running slots, drain row)
        self.stalled: deque[tuple[float, int, int, int]] = deque()  # (lock expiry, job, lane, attempt row)
        self.kills = any(e.kind == "sigkill" for e in scenario.events)
        eng = scenario.engine
        self.lock, self.interval, self.max_stalled = eng.lock_duration, eng.stalled_interval, eng.max_stalled
        self.pool_index = {p.spec.name: p.index for p in ctx.pools}
        #: when each process was created and when it ended (inf: alive); 0 for the initial ones
        self.lifetimes: list[list[float]] = [[0.0, math.inf] for _ in self.state]
        # per pool, its processes not yet signalled (pruned as they go: see alive())
        self.members: list[list[int]] = [[w for w, q in enumerate(self.proc_pool) if q == p.index] for p in ctx.pools]

    def start(self) -> None:
        """Schedule the events and the initial stalled checkers."""
        env = self.ctx.env
        if self.kills:
            for p in self.ctx.pools:
                procs = [w for w, pool in enumerate(self.proc_pool) if pool == p.index]
                if procs:
                    env.process(self._checker(p, procs, 0.0))
        for e in sorted(self.scenario.events, key=lambda e: e.at):
            Timeout(env, e.at, e).callbacks.append(self._fire)

    # ------------------------------------------------------------------ events

    def _fire(self, event: Event) -> None:
        e = cast(EventSpec, event.value)
        pool = self.ctx.pools[self.pool_index[e.pool]]
        now = self.ctx.env.now
        if e.kind == "start":
            delay = self.scenario.engine.start_delay
            if delay > 0:
                Timeout(self.ctx.env, delay, (pool, e.count)).callbacks.append(self._started)
            else:
                self._add_processes(pool, e.count, now)
            return
        running = [w for w, p in enumerate(self.proc_pool) if p == pool.index and self.state[w] == RUNNING]
        if e.kind == "sigkill":  # the busiest first, the oldest among equals (a stable sort)
            running.sort(key=lambda w: -len(self._busy(w)))
        chosen = running[:e.count]
        self._step(now, -len(chosen) * pool.spec.concurrency)
        self._processes(pool, now, -len(chosen))
        for w in chosen:
            self._retire_free(pool, w)
            if e.kind == "sigkill":
                self._kill(w, now)
            else:
                self._terminate(pool, w, now, e.grace)

    def _busy(self, w: int) -> set[int]:
        """The slots of process ``w`` running an attempt now."""
        return {s for s in self.proc_slots[w] if self.ctx.job_on(s) >= 0}

    def _step(self, now: float, delta: int) -> None:
        if delta:
            self.slot_steps.append((now, self.slot_steps[-1][1] + delta))

    def _processes(self, pool: Pool, now: float, delta: int) -> None:
        if delta:
            steps = self.pool_steps[pool.spec.name]
            steps.append((now, steps[-1][1] + delta))

    def _retire_free(self, pool: Pool, w: int) -> None:
        retired = self.retired
        mine = self.proc_slots[w]
        for s in mine:
            retired[s] = True
        if any(s in mine for s in pool.free):
            kept = [s for s in pool.free if not retired[s]]
            pool.free.clear()
            pool.free.extend(kept)

    def last_renewal(self, w: int, now: float) -> float:
        """When process ``w`` last renewed its locks at or before ``now`` (its start if never)."""
        s, half = self.proc_start[w], self.lock / 2
        k = math.floor((now - s) / half) if now > s else 0
        if s + (k + 1) * half <= now:  # floor of a quotient rounded down a renewal that did happen
            k += 1
        return s + k * half

    def _gone(self, w: int, now: float) -> None:
        self.state[w] = GONE
        self.lifetimes[w][1] = now

    def _kill(self, w: int, now: float) -> None:
        ctx = self.ctx
        self._gone(w, now)
        renewed = self.last_renewal(w, now)
        for s in self.proc_slots[w]:
            job = ctx.cancel(s)  # its pending end is ignored; it leaves the lane's active count
            if job < 0:
                continue
            row = self.row_of[s]
            self.log.mark(row, STALLED)  # it ends when the stalled check finds it (as the engine logs it)
            # its lock (and place under the gates) stays until it expires and a check finds it
            expiry = max(self.log.start_of(row), renewed) + self.lock
            self.stalled.append((expiry, job, ctx.lane(job), row))

    def _terminate(self, pool: Pool, w: int, now: float, grace: float) -> None:
        ctx = self.ctx
        self.state[w] = DRAINING
        busy = self._busy(w)
        row = {"pool": pool.spec.name, "process": ctx.worker_names[w], "signalled_at": now, "drained_at": math.nan,
               "cut_off_at": math.nan, "jobs_cut_off": 0, "active_at_signal": len(busy)}
        self.drains.append(row)
        if not busy:
            row["drained_at"] = now
            self._gone(w, now)
            return
        self.draining[w] = (busy, len(self.drains) - 1)
        Timeout(ctx.env, grace, w).callbacks.append(self._deadline)

    def slot_done(self, slot: int, now: float) -> None:
        """An attempt ended on a retired slot (its process is draining)."""
        w = self.ctx.slot_worker[slot]
        entry = self.draining.get(w)
        if entry is None:
            return
        busy, row = entry
        busy.discard(slot)
        if not busy:
            self.drains[row]["drained_at"] = now
            self._gone(w, now)
            del self.draining[w]

    def _deadline(self, event: Event) -> None:
        w = cast(int, event.value)
        entry = self.draining.pop(w, None)
        if entry is None:
            return
        ctx = self.ctx
        now = ctx.env.now
        busy, row = entry
        self._gone(w, now)
        self.drains[row]["cut_off_at"] = now
        self.drains[row]["jobs_cut_off"] = len(busy)
        handed: list[int] = []
        reopened: list[int] = []
        for s in sorted(busy, key=lambda s: (self.log.start_of(self.row_of[s]), s)):  # the order they started
            job = ctx.cancel(s)
            self.log.finish(self.row_of[s], now, CUTOFF)
            q = ctx.lane(job)
            if ctx.release(q, now):
                reopened.append(q)
            handed.append(job)
        ctx.requeue_front(handed, now)  # release.lua: back to waiting at once, in front of their level
        for q in reopened:
            ctx.offer(q, now)

    def _started(self, event: Event) -> None:
        pool, count = cast(tuple[Pool, int], event.value)
        self._add_processes(pool, count, self.ctx.env.now)

    def _add_processes(self, pool: Pool, count: int, now: float) -> None:
        self._take_work(pool, [self._new_process(pool, RUNNING, now) for _ in range(count)], now)

    def _new_process(self, pool: Pool, state: int, now: float) -> int:
        w = self.ctx.add_worker(pool, f"{pool.spec.name}-{self.local[pool.index]}")
        self.local[pool.index] += 1
        self.proc_pool.append(pool.index)
        self.proc_slots.append([])
        self.state.append(state)
        self.proc_start.append(now)
        self.lifetimes.append([now, math.inf])
        self.members[pool.index].append(w)
        return w

    def _take_work(self, pool: Pool, new: list[int], now: float) -> None:
        """Processes ``new`` of ``pool`` are ready: their slots join the pool's free ones."""
        ctx = self.ctx
        c = pool.spec.concurrency
        for w in new:
            slots = [ctx.add_slot(pool, w) for _ in range(c)]
            self.retired.extend(False for _ in slots)
            self.proc_slots[w] = slots
            self.state[w] = RUNNING
            self.proc_start[w] = now
        pool.free.extend(self.proc_slots[w][s] for s in range(c) for w in new)
        self._step(now, len(new) * c)
        self._processes(pool, now, len(new))
        if self.kills and new:
            ctx.env.process(self._checker(pool, new, now))
        ctx.fill(pool, now)

    # ------------------------------------------------------------------ autoscaling

    def launch(self, pool: Pool, delays: list[float], now: float,
               ready: Callable[[int, float], None] | None = None) -> list[int]:
        """New processes of ``pool``, created now, each taking work after its delay; returns them.

        ``ready(process, time)`` is called when one starts taking work (not for one stopped before).
        """
        new = [self._new_process(pool, STARTING, now) for _ in delays]
        for w, delay in zip(new, delays):
            if delay > 0:
                Timeout(self.ctx.env, delay, (pool, w, ready)).callbacks.append(self._launched)
            else:
                self._ready(pool, w, now, ready)
        return new

    def _launched(self, event: Event) -> None:
        pool, w, ready = cast(tuple[Pool, int, Callable[[int, float], None] | None], event.value)
        self._ready(pool, w, self.ctx.env.now, ready)

    def _ready(self, pool: Pool, w: int, now: float, ready: Callable[[int, float], None] | None) -> None:
        if self.state[w] != STARTING:
            return  # stopped while starting
        self._take_work(pool, [w], now)
        if ready is not None:
            ready(w, now)

    def alive(self, pool: Pool) -> tuple[list[int], list[int]]:
        """The pool's processes starting and running (oldest first)."""
        state = self.state
        mine = self.members[pool.index]
        mine[:] = [w for w in mine if state[w] == STARTING or state[w] == RUNNING]  # a signalled one never returns
        return [w for w in mine if state[w] == STARTING], [w for w in mine if state[w] == RUNNING]

    def stop(self, pool: Pool, count: int, now: float, grace: float) -> tuple[int, int]:
        """Stop ``count`` of the pool's processes: starting ones first, then the newest running (SIGTERM,
        ``grace``). Returns how many of each were stopped."""
        starting, running = self.alive(pool)
        cancel = starting[::-1][:count]
        for w in cancel:
            self._gone(w, now)
        term = sorted(running, key=lambda w: (self.proc_start[w], w), reverse=True)[:count - len(cancel)]
        self._step(now, -len(term) * pool.spec.concurrency)
        self._processes(pool, now, -len(term))
        for w in term:
            self._retire_free(pool, w)
            self._terminate(pool, w, now, grace)
        return len(cancel), len(term)

    # ------------------------------------------------------------------ stalled checks

    def _checker(self, pool: Pool, procs: list[int], start: float) -> Generator[Event, Any, None]:
        """The stalled checks of ``procs`` (started together at ``start``): at ``start + m * S`` exactly."""
        env = self.ctx.env
        served = set(pool.queues)
        m = 0
        while any(self.state[w] != GONE for w in procs):
            self.recover(env.now, served)
            m += 1
            yield env.timeout(exact_delay(env.now, start + m * self.interval))

    def recover(self, now: float, served: set[int]) -> None:
        """A stalled check of the lanes ``served``: put back the jobs whose lock ran out, in expiry order."""
        if not self.stalled:
            return
        ctx = self.ctx
        keep: deque[tuple[float, int, int, int]] = deque()
        back: list[tuple[float, int]] = []
        reopened: list[int] = []
        stalled = ctx.jobs.stalled
        for item in self.stalled:
            expiry, job, q, row = item
            if expiry > now + _TIE or q not in served:
                keep.append(item)
                continue
            self.log.finish(row, now, STALLED)
            stalled[job] += 1
            if ctx.release(q, now):
                reopened.append(q)
            if stalled[job] > self.max_stalled:
                ctx.settle(job, DEAD, now)
            else:
                back.append((expiry, job))
        self.stalled = keep
        if back:
            back.sort(key=lambda b: b[0])  # recover_stalled.lua takes them by lock expiry
            ctx.requeue_front([job for _, job in back], now)
        for q in reopened:
            ctx.offer(q, now)

    def frame(self) -> pd.DataFrame:
        """``records.extra["drains"]``."""
        return pd.DataFrame({c: [r[c] for r in self.drains] for c in DRAIN_COLUMNS}).astype(
            {"pool": object, "process": object, "signalled_at": float, "drained_at": float, "cut_off_at": float,
             "jobs_cut_off": "int64", "active_at_signal": "int64"})
