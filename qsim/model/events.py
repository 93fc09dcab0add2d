"""Pool events: crashes and stalled recovery, graceful shutdown under load, scale-up.

``[[events]]`` happen at their ``at`` (in file order at equal times) to the
first ``count`` running processes of the pool (started earliest, not yet
signalled), as the engine harness chooses them. Each process has
``concurrency`` slots; a slot that a process can no longer use is *retired*
(never handed out again). ``Records.slots`` steps down by the process's slots
when it is signalled (``sigterm`` or ``sigkill``) and up when ``start`` adds
processes, as the harness records them.

``sigkill`` (a crash): the process's slots retire at once; each attempt it
was running stops then, but its job keeps its lock — and its place under the
queue's ``concurrency_limit`` and in the queue's ``active`` count — until
``lock_duration`` after the kill. Its attempt is logged ``stalled`` and ends
when a stalled check finds it (as the engine logs it: the job was active
until then), so busy time and ``active`` include the wait for the lock. Stalled checks run in every live process now and every
``stalled_interval`` (the engine's ``recover_stalled`` loop, started with
the process): processes started together check together, so the model runs
one checker per pool and start time (time 0 for the initial processes, the
event's time for a ``start``), checking the pool's queues at ``t0``, ``t0 +
interval``, ... while any of those processes lives. A check puts back every
job whose lock has run out (``stalled + 1``): to waiting, or to the DLQ when
it has now stalled more than ``max_stalled`` times (``recover_stalled.lua``).
A stall does not use up an attempt, and a cut-off (below) is not a stall
(the engine's ``release.lua`` counts neither). So a recovered job is back between
``lock_duration`` and ``lock_duration + stalled_interval`` after the kill (the
engine renews locks every ``lock_duration / 2``, so its real lock may run out
up to half a lock earlier; the model keeps the full lock, as documented for
the scenario). Killed processes never come back; ``start`` adds new ones.

``sigterm`` (graceful shutdown): the process stops fetching at once (its free
slots retire); its running attempts run on. When the last one ends it has
drained; at ``at + grace`` the attempts still running are cut off (logged
``cutoff``, not using up an attempt) and their jobs handed back to the queue
at once (``release.lua``: waiting, at the back of their priority level, the
concurrency limit freed), where other processes pick them up. Each
signalled process gets one row in ``records.extra["drains"]``: ``pool,
process, signalled_at, drained_at, cut_off_at, jobs_cut_off, active_at_signal``
(``drained_at`` NaN when cut off, ``cut_off_at`` NaN when drained) — the
distribution of ``drained_at - signalled_at`` is what grace-period advice is
made from.

``start``: ``count`` new processes join the pool (named on from the pool's
last one) and take work at once.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Generator
from typing import Any, cast

import pandas as pd
from simpy.events import Event, Timeout

from qsim.model.attempts import CUTOFF, STALLED
from qsim.model.context import PoolContext
from qsim.model.dispatch import Pool
from qsim.model.recorders import AttemptRecords
from qsim.model.state import DEAD
from qsim.scenario import EventSpec, Scenario

__all__ = ["PoolEvents", "DRAIN_COLUMNS"]

DRAIN_COLUMNS = ("pool", "process", "signalled_at", "drained_at", "cut_off_at", "jobs_cut_off", "active_at_signal")
RUNNING, DRAINING, GONE = 0, 1, 2


class PoolEvents:
    """Processes, their slots and the scenario's events during one model run.

    ``retired`` (per slot) and :meth:`slot_done` are the core's ``retired`` and ``slot_done``.
    """

    def __init__(self, ctx: PoolContext, records: AttemptRecords, scenario: Scenario) -> None:
        self.ctx = ctx
        self.scenario = scenario
        self.log, self.row_of = records.log, records.row_of
        self.proc_pool: list[int] = []
        self.proc_slots: list[list[int]] = []
        self.state: list[int] = []
        for p in ctx.pools:
            for w in range(p.spec.workers):
                self.proc_pool.append(p.index)
                self.proc_slots.append([p.slots[0] + w * p.spec.concurrency + c for c in range(p.spec.concurrency)])
                self.state.append(RUNNING)
        self.local = [p.spec.workers for p in ctx.pools]  # processes each pool has started
        self.retired = [False] * ctx.n_slots  # slots of a signalled process: never handed out again
        self.slot_steps: list[tuple[float, int]] = [(0.0, ctx.n_slots)]
        self.drains: list[dict[str, Any]] = []
        self.draining: dict[int, tuple[set[int], int]] = {}  # process -> (running slots, drain row)
        self.stalled: deque[tuple[float, int, int, int]] = deque()  # (lock expiry, job, queue, attempt row)
        self.kills = any(e.kind == "sigkill" for e in scenario.events)
        eng = scenario.engine
        self.lock, self.interval, self.max_stalled = eng.lock_duration, eng.stalled_interval, eng.max_stalled
        self.pool_index = {p.spec.name: p.index for p in ctx.pools}

    def start(self) -> None:
        """Schedule the events and the initial stalled checkers."""
        env = self.ctx.env
        if self.kills:
            for p in self.ctx.pools:
                procs = [w for w, pool in enumerate(self.proc_pool) if pool == p.index]
                if procs:
                    env.process(self._checker(p, procs))
        for e in sorted(self.scenario.events, key=lambda e: e.at):
            Timeout(env, e.at, e).callbacks.append(self._fire)

    # ------------------------------------------------------------------ events

    def _fire(self, event: Event) -> None:
        e = cast(EventSpec, event.value)
        pool = self.ctx.pools[self.pool_index[e.pool]]
        now = self.ctx.env.now
        if e.kind == "start":
            self._add_processes(pool, e.count, now)
            return
        chosen = [w for w, p in enumerate(self.proc_pool) if p == pool.index and self.state[w] == RUNNING][:e.count]
        self._step(now, -len(chosen) * pool.spec.concurrency)
        for w in chosen:
            self._retire_free(pool, w)
            if e.kind == "sigkill":
                self._kill(w, now)
            else:
                self._terminate(pool, w, now, e.grace)

    def _step(self, now: float, delta: int) -> None:
        if delta:
            self.slot_steps.append((now, self.slot_steps[-1][1] + delta))

    def _retire_free(self, pool: Pool, w: int) -> None:
        retired = self.retired
        mine = self.proc_slots[w]
        for s in mine:
            retired[s] = True
        if any(s in mine for s in pool.free):
            kept = [s for s in pool.free if not retired[s]]
            pool.free.clear()
            pool.free.extend(kept)

    def _kill(self, w: int, now: float) -> None:
        ctx = self.ctx
        self.state[w] = GONE
        for s in self.proc_slots[w]:
            job = ctx.cancel(s)  # its pending end is ignored; it leaves the queue's active count
            if job < 0:
                continue
            row = self.row_of[s]
            self.log.result[row] = STALLED  # it ends when the stalled check finds it (as the engine logs it)
            q = ctx.jobs.queue[job]  # its lock (and place under the gates) stays until recovered
            self.stalled.append((now + self.lock, job, q, row))

    def _terminate(self, pool: Pool, w: int, now: float, grace: float) -> None:
        ctx = self.ctx
        self.state[w] = DRAINING
        busy = {s for s in self.proc_slots[w] if ctx.job_on(s) >= 0}
        row = {"pool": pool.spec.name, "process": ctx.worker_names[w], "signalled_at": now, "drained_at": math.nan,
               "cut_off_at": math.nan, "jobs_cut_off": 0, "active_at_signal": len(busy)}
        self.drains.append(row)
        if not busy:
            row["drained_at"] = now
            self.state[w] = GONE
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
            self.state[w] = GONE
            del self.draining[w]

    def _deadline(self, event: Event) -> None:
        w = cast(int, event.value)
        entry = self.draining.pop(w, None)
        if entry is None:
            return
        ctx = self.ctx
        now = ctx.env.now
        busy, row = entry
        self.state[w] = GONE
        self.drains[row]["cut_off_at"] = now
        self.drains[row]["jobs_cut_off"] = len(busy)
        handed: list[int] = []
        reopened: list[int] = []
        for s in sorted(busy):
            job = ctx.cancel(s)
            self.log.finish(self.row_of[s], now, CUTOFF)
            q = ctx.jobs.queue[job]
            if ctx.release(q, now):
                reopened.append(q)
            handed.append(job)
        ctx.requeue_batch(handed, now)  # release.lua: back to waiting, at once
        for q in reopened:
            ctx.offer(q, now)

    def _add_processes(self, pool: Pool, count: int, now: float) -> None:
        ctx = self.ctx
        c = pool.spec.concurrency
        new: list[int] = []
        for _ in range(count):
            w = ctx.add_worker(pool, f"{pool.spec.name}-{self.local[pool.index]}")
            self.local[pool.index] += 1
            slots = [ctx.add_slot(pool, w) for _ in range(c)]
            self.retired.extend(False for _ in slots)
            self.proc_pool.append(pool.index)
            self.proc_slots.append(slots)
            self.state.append(RUNNING)
            new.append(w)
        pool.free.extend(self.proc_slots[w][s] for s in range(c) for w in new)
        self._step(now, count * c)
        if self.kills and new:
            ctx.env.process(self._checker(pool, new))
        ctx.fill(pool, now)

    # ------------------------------------------------------------------ stalled checks

    def _checker(self, pool: Pool, procs: list[int]) -> Generator[Event, Any, None]:
        env = self.ctx.env
        served = set(pool.queues)
        while any(self.state[w] != GONE for w in procs):
            self.recover(env.now, served)
            yield env.timeout(self.interval)

    def recover(self, now: float, served: set[int]) -> None:
        """A stalled check of the queues ``served``: put back the jobs whose lock ran out."""
        if not self.stalled:
            return
        ctx = self.ctx
        keep: deque[tuple[float, int, int, int]] = deque()
        back: list[int] = []
        reopened: list[int] = []
        stalled = ctx.jobs.stalled
        for item in self.stalled:
            expiry, job, q, row = item
            if expiry > now or q not in served:
                keep.append(item)
                continue
            self.log.finish(row, now, STALLED)
            stalled[job] += 1
            if ctx.release(q, now):
                reopened.append(q)
            if stalled[job] > self.max_stalled:
                ctx.settle(job, DEAD, now)
            else:
                back.append(job)
        self.stalled = keep
        if back:
            ctx.requeue_batch(back, now)
        for q in reopened:
            ctx.offer(q, now)

    def frame(self) -> pd.DataFrame:
        """``records.extra["drains"]``."""
        return pd.DataFrame({c: [r[c] for r in self.drains] for c in DRAIN_COLUMNS}).astype(
            {"pool": object, "process": object, "signalled_at": float, "drained_at": float, "cut_off_at": float,
             "jobs_cut_off": "int64", "active_at_signal": "int64"})
