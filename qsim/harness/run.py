"""Run a scenario on the real engine: worker processes, a producer, events, records.

:func:`run_scenario_async` (``await`` it in a notebook) and its sync twin
:func:`run_scenario` start every pool's worker processes
(:mod:`qsim.harness.processes`), add the planned jobs on time
(:mod:`qsim.harness.plan`), send the scenario's events as real signals
(``sigterm``, ``sigkill``) or start new processes (``start``), wait until
every job has settled (up to a drain timeout from the model's settle time,
:mod:`qsim.harness.drain`), and build the same records and Summary as the model.

Every timestamp is Redis's clock (``TIME`` inside the scripts) minus the run's
start, also read from Redis. Each run uses a key prefix of its own, so it never
touches other data, and deletes its keys at the end unless asked to keep them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import secrets
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import redis.asyncio

from qsim.autoscale.hpa import Recommend
from qsim.engine import AsyncQueue, FlowProducer, JobInfo
from qsim.engine.eventloop import cancel_and_wait
from qsim.engine.safety import unreachable
from qsim.errors import HarnessError, NotSupportedError, QsimError, RedisUnavailable
from qsim.harness.aio import run_sync
from qsim.harness.autoscaling import EngineAutoscaler
from qsim.harness.drain import Drain, predicted_drain, unsettled_message, wait_settled
from qsim.harness.pauses import PAUSE_LIMIT, PauseWatch
from qsim.harness.plan import PlannedJob, engine_options, job_options, plan_jobs
from qsim.harness.processes import WorkerProcesses, apply_limits
from qsim.names import name_problem
from qsim.results.display import summary_html, summary_line
from qsim.results.records import Records, attempts_frame, jobs_frame
from qsim.results.summary import PoolScaling, Summary, summarize
from qsim.spec.scenario import Scenario

__all__ = ["EngineResult", "run_scenario", "run_scenario_async", "check_supported"]

logger = logging.getLogger(__name__)

Progress = Callable[[float], None]
#: The engine's attempt-log outcomes (the worker labels a timed-out attempt itself) as the records' results.
ATTEMPT_RESULT = {"completed": "ok", "failed": "failed", "timeout": "timeout", "stalled": "stalled",
                  "released": "cutoff"}


@dataclass(frozen=True)
class EngineResult:
    """What one engine run measured."""

    records: Records
    summary: Summary
    timeseries: pd.DataFrame
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    prefix: str = ""  # the run's key prefix (its keys are left in Redis with keep=True)
    drain_timeout: float = 0.0  # seconds it waited after the last arrival, at most
    unsettled: dict[str, dict[str, int]] = field(default_factory=dict)  # queue -> state -> jobs left then
    paused: float = 0.0  # the longest pause of the harness process during the run, seconds (qsim.harness.pauses)

    @property
    def jobs(self) -> pd.DataFrame:
        """The per-job records (``records.jobs``)."""
        return self.records.jobs

    def notes(self) -> list[str]:
        """What a reader should know beside the figures: jobs left when the drain timed out, a pause of the
        machine (:data:`~qsim.harness.pauses.PAUSE_LIMIT` or longer) that the timings include."""
        notes = [f"queue {q}: {', '.join(f'{n} {state}' for state, n in states.items())} when the "
                 f"{self.drain_timeout:g} s drain timeout ran out" for q, states in self.unsettled.items()]
        if self.paused >= PAUSE_LIMIT:
            notes.append(_paused(self.paused))
        return notes

    def __repr__(self) -> str:
        s = self.summary
        unsettled = f", {len(self.unsettled)} queue(s) unsettled" if self.unsettled else ""
        return f"EngineResult({s['scenario']!r}, seed {s['seed']}: {summary_line(s)}{unsettled})"

    def _repr_html_(self) -> str:
        s = self.summary
        return summary_html(s, title=f"Engine run of {s['scenario']} (seed {s['seed']})", notes=self.notes())


def _paused(seconds: float) -> str:
    return f"this machine paused the run for {seconds:.2f} s: its waits and throughput include the pause"


def check_supported(scenario: Scenario) -> None:
    """Refuse, naming the key, what the engine harness cannot run: a queue name the engine cannot make
    Redis keys of (braces, colons, spaces; the lengths and wrr weights are checked when the scenario loads)."""
    label = str(scenario.source) if scenario.source else scenario.name
    for i, q in enumerate(scenario.queues):
        problem = name_problem(q.name)
        if problem:
            raise NotSupportedError(f"{label}: not supported by the engine: queues[{i}].name {problem} (queue "
                                    f"names become part of its Redis keys)")


async def _redis_now(client: redis.asyncio.Redis) -> float:
    sec, usec = await client.time()
    return float(sec) + float(usec) / 1e6


async def _run(scenario: Scenario, url: str, seed: int, max_jobs: int | None, drain: Drain,
               progress: Progress | None, keep: bool, logdir: Path,
               recommend: Mapping[str, Recommend] | None = None) -> EngineResult:
    plan = plan_jobs(scenario, seed=seed, max_jobs=max_jobs)
    prefix = f"qsim-run-{secrets.token_hex(4)}"
    client = redis.asyncio.Redis.from_url(url)
    try:
        await client.ping()
    except (redis.RedisError, OSError) as e:
        await client.aclose()
        raise RedisUnavailable(unreachable(url, e)) from e
    queues = {q.name: AsyncQueue(q.name, redis=url, prefix=prefix) for q in scenario.queues}
    pools = WorkerProcesses(scenario, url, prefix=prefix, ready_key=f"{prefix}:harness:ready", logdir=logdir)
    try:
        await asyncio.to_thread(apply_limits, scenario, url, prefix, keep_completed=True)
        first = pools.start_all()
        await asyncio.to_thread(pools.wait_ready, first, 60.0)
        t0 = await _redis_now(client)
        loop_t0 = asyncio.get_running_loop().time()
        slot_changes = [(0.0, scenario.slots)]
        processes = {p.name: [(0.0, p.workers)] for p in scenario.pools}
        added: dict[str, PlannedJob] = {}
        events = asyncio.create_task(_events(scenario, pools, client, loop_t0, t0, slot_changes, processes))
        scalers = [EngineAutoscaler(scenario, spec, pools, url=url, prefix=prefix, seed=seed, loop_t0=loop_t0,
                                    recommend=(recommend or {}).get(spec.pool)) for spec in scenario.autoscalers]
        polls = [asyncio.create_task(a.run()) for a in scalers]
        try:
            with PauseWatch() as watch:  # from the first arrival until every job settled
                async with FlowProducer(redis=url, prefix=prefix) as flows:
                    await _produce(plan, scenario, queues, flows, added, loop_t0, progress, len(plan))
                draining = None if progress is None else (lambda f: progress(0.9 + 0.1 * f))
                unsettled = await wait_settled(queues, drain.timeout, expected=drain.settle or drain.timeout,
                                               progress=draining)
        finally:
            events.cancel()
            try:
                await events
            except asyncio.CancelledError:
                pass
            except (QsimError, OSError) as e:  # a process that did not start: the run goes on without it
                logger.error("a scenario event failed: %s", e)
            await cancel_and_wait(polls, raise_errors=True)  # a lost cancel must not keep the run waiting
        ended = asyncio.get_running_loop().time() - loop_t0
        for a in scalers:
            await a.finish()
            processes[a.spec.pool] = list(a.steps)
        slot_changes = _with_scaled_slots(slot_changes, scalers, scenario)
        if unsettled:
            logger.warning("%s", unsettled_message(unsettled, drain.timeout))
        if watch.paused:
            logger.warning("%s", _paused(watch.longest))
        exit_codes = await asyncio.to_thread(pools.stop_all, max(pools.grace(p.name) for p in scenario.pools) + 10)
        infos = [info for q in queues.values() for info in await q.job_records()]
        records = _records(infos, added, t0, slot_changes, processes)
    except (RedisUnavailable, redis.ConnectionError, redis.TimeoutError) as e:
        # reached at the start: Redis went away during the run, a failure of the run, not bad input
        raise HarnessError(f"Redis went away during the run: {e}") from e
    finally:
        pools.stop_all(timeout=5)  # at once when stopped already; blocking on purpose (a cancelled run too)
        if not keep:  # whatever ended the run (an error, Ctrl-C), its keys go
            await _forget(client, prefix)
        for q in queues.values():
            await q.close()
        await client.aclose()
    summary = summarize(records, scenario=scenario.name, source="engine", seed=seed, warmup=scenario.warmup,
                        window=scenario.window_length)
    if scalers:
        summary["autoscaling"] = cast(dict[str, PoolScaling],
                                      {a.spec.pool: a.section(ended, records.attempts) for a in scalers})
    return EngineResult(records=records, summary=summary, timeseries=_timeseries(records.jobs),
                        exit_codes=exit_codes, prefix=prefix, drain_timeout=drain.timeout, unsettled=unsettled,
                        paused=watch.longest)


def _with_scaled_slots(changes: list[tuple[float, int]], scalers: list[EngineAutoscaler],
                       scenario: Scenario) -> list[tuple[float, int]]:
    """The run's slot count over time: the events' changes and each autoscaled pool's processes taking work."""
    deltas = [(t, b - a) for t, a, b in _deltas(changes)]
    for s in scalers:
        c = scenario.pool(s.spec.pool).concurrency
        deltas += [(t, (b - a) * c) for t, a, b in _deltas(s.steps)]
    out = [changes[0]]
    for t, d in sorted(deltas, key=lambda x: x[0]):
        if d:
            out.append((t, out[-1][1] + d))
    return out


def _deltas(steps: list[tuple[float, int]]) -> list[tuple[float, int, int]]:
    return [(t, a, b) for (_, a), (t, b) in zip(steps, steps[1:])]


async def _produce(plan: list[PlannedJob], scenario: Scenario, queues: dict[str, AsyncQueue], flows: FlowProducer,
                   added: dict[str, PlannedJob], loop_t0: float, progress: Progress | None, total: int) -> None:
    """Add every planned job on time: jobs due at the same moment in one bulk call per
    queue, each flow (parent and children) in one atomic call."""
    loop = asyncio.get_running_loop()
    i = 0
    while i < len(plan):
        delay = loop_t0 + plan[i].at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        now = loop.time() - loop_t0
        batch: dict[str, list[tuple[str, Any, dict[str, Any]]]] = {}
        while i < len(plan) and plan[i].at <= now:
            job, spec = plan[i], scenario.job(plan[i].type)
            if spec.flow:
                await flows.add(parent=_item(job, scenario, with_queue=True),
                                children=[_item(c, scenario, with_queue=True) for c in job.children],
                                on_child_failure=spec.flow.on_child_failure)
                added.update((c.job_id, c) for c in job.children)
            else:
                batch.setdefault(job.queue, []).append(_item(job, scenario))
            added[job.job_id] = job
            i += 1
        for queue, items in batch.items():
            await queues[queue].add_bulk(items)
        if progress:
            progress(0.9 * i / max(total, 1))


def _item(job: PlannedJob, scenario: Scenario, *, with_queue: bool = False) -> tuple[Any, ...]:
    """``(name, data, options)`` for ``add_bulk``, or ``(queue, name, data, options)`` for a flow."""
    opts = engine_options(job_options(scenario.job(job.type)), job.job_id)
    return (job.queue, job.type, job.payload, opts) if with_queue else (job.type, job.payload, opts)


async def _events(scenario: Scenario, pools: WorkerProcesses, client: redis.asyncio.Redis, loop_t0: float,
                  t0: float, slot_changes: list[tuple[float, int]],
                  processes: dict[str, list[tuple[float, int]]]) -> None:
    """Carry out the scenario's events at their times: real signals, real new processes (their times
    go to ``slot_changes`` and, per pool, ``processes``)."""
    loop = asyncio.get_running_loop()
    for event in sorted(scenario.events, key=lambda e: e.at):
        delay = loop_t0 + event.at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        concurrency = scenario.pool(event.pool).concurrency
        if event.kind == "start":
            ids = await asyncio.to_thread(pools.apply, event)
            now = await _redis_now(client) - t0
            slot_changes.append((now, slot_changes[-1][1] + len(ids) * concurrency))
            delta = len(ids)
        else:
            now = await _redis_now(client) - t0
            ids = pools.apply(event)
            slot_changes.append((now, slot_changes[-1][1] - len(ids) * concurrency))
            delta = -len(ids)
        if delta:
            steps = processes[event.pool]
            steps.append((now, steps[-1][1] + delta))
        logger.info("t=%.2f %s %s: %s", now, event.kind, event.pool, ", ".join(ids) or "no process left")


def _records(infos: list[JobInfo], added: dict[str, PlannedJob], t0: float,
             slot_changes: list[tuple[float, int]], processes: dict[str, list[tuple[float, int]]]) -> Records:
    """JobRecords from the stored jobs; an added job Redis no longer has is ``lost``.

    A fan-out child is expected once its parent has completed (the handler adds
    the children on success, just before it returns) or when Redis has it;
    flow children are added with their parent.
    """
    added = dict(added)
    completed = {info.id for info in infos if info.state == "completed"}
    present = {info.id for info in infos}
    for job in list(added.values()):
        if job.children and job.payload.get("fan"):
            added.update((c.job_id, c) for c in job.children if job.job_id in completed or c.job_id in present)
    nan = math.nan
    cols: dict[str, list[Any]] = {k: [] for k in ("job_id", "type", "queue", "priority", "enqueued", "started",
                                                  "finished", "attempts", "failed_attempts", "stalled", "worker",
                                                  "outcome", "parent")}
    att: dict[str, list[Any]] = {k: [] for k in ("job_id", "attempt", "worker", "start", "end", "result")}
    found = set()

    def rel(x: float | None) -> float:
        return x - t0 if x is not None else nan

    def row(*values: Any) -> None:
        for key, v in zip(cols, values, strict=True):
            cols[key].append(v)

    for info in infos:
        if info.id not in added:
            continue
        found.add(info.id)
        outcome = info.state if info.state in ("completed", "dead") else "unfinished"
        finished = rel(info.finished_at) if outcome != "unfinished" else nan
        row(info.id, info.name, info.queue, info.priority, rel(info.enqueued_at), rel(info.started_at), finished,
            len(info.attempts), sum(a.outcome in ("failed", "timeout") for a in info.attempts), info.stalled,
            info.worker or "",
            outcome, added[info.id].parent)
        for n, a in enumerate(info.attempts, 1):
            for key, v in zip(att, (info.id, n, a.worker, a.start - t0, a.end - t0,
                                    ATTEMPT_RESULT.get(a.outcome, "failed")), strict=True):
                att[key].append(v)
    for job_id, job in added.items():
        if job_id not in found:
            row(job_id, job.type, job.queue, job.priority, job.at, nan, nan, 0, 0, 0, "", "lost", job.parent)
    jobs = jobs_frame(cols).sort_values("enqueued", kind="stable").reset_index(drop=True)
    return Records(jobs=jobs, attempts=attempts_frame(att), slots=tuple(slot_changes),
                   workers={name: tuple(steps) for name, steps in processes.items()})


def _timeseries(jobs: pd.DataFrame) -> pd.DataFrame:
    """Waiting and active jobs per queue at every change, rebuilt from the records."""
    frames = []
    for queue, g in jobs.groupby("queue", sort=True):
        enq, start = g["enqueued"].to_numpy(float), g["started"].to_numpy(float)
        end = g["finished"].to_numpy(float)
        t = np.concatenate([enq, start[~np.isnan(start)], end[~np.isnan(start) & ~np.isnan(end)]])
        dw = np.concatenate([np.ones(enq.size), -np.ones(int((~np.isnan(start)).sum())),
                             np.zeros(int((~np.isnan(start) & ~np.isnan(end)).sum()))])
        da = np.concatenate([np.zeros(enq.size), np.ones(int((~np.isnan(start)).sum())),
                             -np.ones(int((~np.isnan(start) & ~np.isnan(end)).sum()))])
        order = np.argsort(t, kind="stable")
        frames.append(pd.DataFrame({"time": t[order], "queue": queue, "waiting": np.cumsum(dw[order]).astype(int),
                                    "active": np.cumsum(da[order]).astype(int)}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["time", "queue", "waiting", "active"])


async def _forget(client: redis.asyncio.Redis, prefix: str) -> None:
    """Delete the run's keys; where Redis cannot be reached any more, say which keys stay."""
    try:
        await _delete_keys(client, prefix)
    except (redis.RedisError, OSError) as e:
        logger.warning("the run's keys stay in Redis (%s): delete the keys matching %s:* when it is back", e, prefix)


async def _delete_keys(client: redis.asyncio.Redis, prefix: str) -> None:
    batch: list[Any] = []
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            await client.unlink(*batch)
            batch.clear()
    if batch:
        await client.unlink(*batch)


async def run_scenario_async(scenario: Scenario, redis_url: str, *, seed: int | None = None,
                             max_jobs: int | None = None, drain_timeout: float | None = None,
                             progress: Progress | None = None, keep: bool = False,
                             logdir: str | Path | None = None,
                             recommend: Mapping[str, Recommend] | None = None) -> EngineResult:
    """Run ``scenario`` on the engine against ``redis_url``, in real time (``await`` it in a notebook).

    Args:
        seed: Overrides the scenario's seed (arrivals and service times).
        max_jobs: Add only the first ``max_jobs`` jobs.
        drain_timeout: Seconds to wait after the last arrival for every job to
            settle; jobs still open then are ``unfinished``, reported per queue
            in a warning. Default: from the model's settle time of the same run
            (:mod:`qsim.harness.drain`: ``max(30, 1.5 x settle + 10)``).
        progress: Called with the fraction done, now and then.
        keep: Leave the run's keys in Redis (prefix ``qsim-run-<hex>``).
        logdir: Where worker processes write their logs (default: a temp dir).
        recommend: Per autoscaled pool whose policy scales on ``qsim advise``'s recommendation, the
            function making it (:class:`qsim.advise.load.LoadAdvisor`; ``qsim run`` passes it).
    """
    check_supported(scenario)
    seed = scenario.seed if seed is None else seed
    if drain_timeout is None:
        drain = await asyncio.to_thread(predicted_drain, scenario, seed=seed, max_jobs=max_jobs, recommend=recommend)
        logger.info("drain timeout %.0f s: the model settles %.1f s after the last arrival", drain.timeout,
                    drain.settle)
    else:
        if not drain_timeout >= 0:
            raise ValueError(f"drain_timeout must be >= 0 seconds, got {drain_timeout!r}")
        drain = Drain(settle=0.0, timeout=float(drain_timeout))
    if logdir is None:
        with tempfile.TemporaryDirectory(prefix="qsim-run-") as tmp:
            return await _run(scenario, redis_url, seed, max_jobs, drain, progress, keep, Path(tmp), recommend)
    Path(logdir).mkdir(parents=True, exist_ok=True)
    return await _run(scenario, redis_url, seed, max_jobs, drain, progress, keep, Path(logdir), recommend)


def run_scenario(scenario: Scenario, redis_url: str, *, seed: int | None = None, max_jobs: int | None = None,
                 drain_timeout: float | None = None, progress: Progress | None = None, keep: bool = False,
                 logdir: str | Path | None = None, recommend: Mapping[str, Recommend] | None = None) -> EngineResult:
    """:func:`run_scenario_async` from sync code; inside a running event loop (Jupyter) it runs
    in a worker thread (:func:`qsim.harness.aio.run_sync`). Same arguments."""
    return run_sync(lambda: run_scenario_async(scenario, redis_url, seed=seed, max_jobs=max_jobs,
                                               drain_timeout=drain_timeout, progress=progress, keep=keep,
                                               logdir=logdir, recommend=recommend))


if os.name != "posix":  # pragma: no cover - signals and sessions are POSIX
    raise ImportError("the engine harness needs a POSIX system (signals, process groups)")
