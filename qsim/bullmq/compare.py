"""Model vs a BullMQ deployment: ``qsim compare SCENARIO --target bullmq --redis URL --queue Q``.

:func:`compare_bullmq_async` runs the scenario on the model, then drives the
very same arrivals (the scenario's drawn workload, :func:`qsim.harness.plan.plan_jobs`)
into the BullMQ queues in real time, where your BullMQ workers take them;
waits until every job of the run has ended (or the drain timeout passed);
reads the jobs back with the calibrate BullMQ reader
(:func:`qsim.calibrate.bullmq_source.read_bullmq`); and returns the same
document as ``qsim compare`` (:class:`qsim.analysis.fidelity.compare.Comparison`:
``model``, ``engine`` — here the BullMQ measurement, ``source`` ``"bullmq"`` —
and ``ratios``) with a ``bullmq`` part: the queues, the prefix, the run id
and what BullMQ does differently (:func:`qsim.bullmq.options.notes`).

With ``worker_command`` qsim starts the workers itself: each pool's ``workers``
processes run the command, and a pool with an ``[[autoscalers]]`` table is
scaled by the model's controller on the BullMQ queue's keys
(:mod:`qsim.bullmq.autoscaling`, where the command's environment is listed);
the document then has ``autoscaling``, the model's and the measured worker
counts side by side (:func:`qsim.analysis.fidelity.autoscaling.autoscaling_agreement`),
as ``qsim compare`` on qsim's engine. Without it, an autoscaled scenario is refused:
qsim cannot scale workers it did not start.

Each job's data is the type's ``payload`` template rendered
(:mod:`qsim.spec.templates`) when it has one, else the planned payload
``{"s": [...], "x": [...]}`` (service seconds and failure flag per attempt,
plus ``jobs[].data``): a synthetic worker that sleeps ``s`` runs exactly the
model's jobs (the test suite's BullMQ worker does). Job ids are
``<run id>-<type>-<n>`` (children ``<parent id>.<k>``); nothing is deleted.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from qsim.analysis.fidelity.compare import Comparison, add_bands, compare_summaries, wants_bands
from qsim.bullmq.measure import summary_from_measured
from qsim.bullmq.options import DEFAULT_PREFIX, check_supported, child_options, job_options, notes, priorities
from qsim.errors import NotSupportedError, ScenarioError
from qsim.harness.pauses import PauseWatch, paused_part, remeasured
from qsim.results.summary import Summary
from qsim.spec.scenario import Scenario
from qsim.spec.templates import render

__all__ = ["compare_bullmq", "compare_bullmq_async", "queue_map", "check_workers"]

logger = logging.getLogger(__name__)


def queue_map(scenario: Scenario, queues: Sequence[str]) -> dict[str, str]:
    """Scenario queue -> BullMQ queue from ``--queue`` values: one name for a one-queue scenario,
    else each a scenario queue's name (the same BullMQ queue) or ``SCENARIO=BULLMQ``.

    Raises:
        ScenarioError: A value that names no scenario queue, or a scenario queue left without one.
    """
    names = [q.name for q in scenario.queues]
    if not queues:
        raise ScenarioError("name the BullMQ queue with --queue (one per scenario queue)")
    out: dict[str, str] = {}
    if len(names) == 1 and len(queues) == 1 and "=" not in queues[0]:
        return {names[0]: queues[0]}
    for value in queues:
        ours, _, theirs = value.partition("=")
        if ours not in names:
            raise ScenarioError(f"--queue {value!r}: the scenario has no queue {ours!r} (its queues: "
                                f"{', '.join(names)}; write SCENARIO_QUEUE=BULLMQ_QUEUE)")
        out[ours] = theirs or ours
    missing = [n for n in names if n not in out]
    if missing:
        raise ScenarioError(f"--queue: no BullMQ queue given for the scenario's queue{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(missing)}")
    return out


def check_workers(scenario: Scenario, worker_command: Sequence[str] | None) -> None:
    """Refuse an autoscaled scenario without a worker command (qsim cannot scale workers it did not start),
    and with one, an autoscaler on a metric BullMQ has no gauge of.

    Raises:
        NotSupportedError: Either.
    """
    if worker_command:
        from qsim.bullmq.autoscaling import check_autoscalers

        check_autoscalers(scenario)
    elif scenario.autoscalers:
        pools = ", ".join(a.pool for a in scenario.autoscalers)
        raise NotSupportedError(f"{scenario.source or scenario.name}: [[autoscalers]] (pool {pools}) cannot scale "
                                f"BullMQ workers qsim did not start: give --worker-command CMD (qsim then starts "
                                f"and scales them) or remove the autoscalers")


async def _unfinished(client: Any, prefix: str, ids: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(queue, id)`` pairs not yet in their queue's completed or failed set."""
    left = []
    for i in range(0, len(ids), 2000):
        chunk = ids[i:i + 2000]
        pipe = client.pipeline(transaction=False)
        for q, job_id in chunk:
            pipe.zscore(f"{prefix}:{q}:completed", job_id)
            pipe.zscore(f"{prefix}:{q}:failed", job_id)
        flat = await pipe.execute()
        left += [pair for k, pair in enumerate(chunk) if flat[2 * k] is None and flat[2 * k + 1] is None]
    return left


def _reach(url: str) -> None:
    """Log in to the Redis of the BullMQ queues and leave; RedisUnavailable (one sentence) when that fails."""
    from qsim.calibrate.redis_read import open_client

    open_client(url).close()


async def _add_planned(producer: Any, scenario: Scenario, plan: Sequence[Any], *, mapping: Mapping[str, str],
                       run_id: str, t0: float, added: list[tuple[str, str, str, float]],
                       progress: Callable[[float], None] | None) -> None:
    """Add each planned job (a flow with its children) to BullMQ at its time after ``t0``, noting each in
    ``added``; return when BullMQ has taken them all."""
    prio = priorities(scenario)
    seen: dict[str, int] = {}

    def data(job_type: str, job_id: str, n: int, planned: Any) -> Any:
        spec = scenario.job(job_type)
        if spec.payload is None:
            return planned
        return render(spec.payload, job_id=job_id, n=n, type=job_type, queue=spec.queue, run_id=run_id)

    tasks: list[asyncio.Task[str]] = []
    for i, p in enumerate(plan):
        delay = t0 + p.at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        n = seen.get(p.type, 0)
        seen[p.type] = n + 1
        job_id = f"{run_id}-{p.type}-{n}"
        queue = mapping[p.queue]
        opts = job_options(scenario.job(p.type), job_id, prio[p.type])
        payload = data(p.type, job_id, n, p.payload)
        added.append((job_id, p.type, queue, t0 + p.at))
        if p.children:
            flow = scenario.job(p.type).flow  # a planned job with children is a flow's parent
            on_fail = flow.on_child_failure if flow is not None else "fail"
            kids = []
            for k, c in enumerate(p.children):
                cid = f"{job_id}.{k}"
                kids.append((mapping[c.queue], c.type, data(c.type, cid, n, c.payload),
                             child_options(scenario.job(c.type), cid, prio[c.type], on_fail)))
                added.append((cid, c.type, mapping[c.queue], t0 + p.at))
            tasks.append(asyncio.create_task(producer.add_flow(queue, p.type, payload, opts, kids)))
        else:
            tasks.append(asyncio.create_task(producer.add(queue, p.type, payload, opts)))
        if progress is not None:
            progress(0.9 * (i + 1) / len(plan))
    await asyncio.gather(*tasks)


async def _drain(client: Any, prefix: str, added: Sequence[tuple[str, str, str, float]], *, timeout: float,
                 run_id: str) -> None:
    """Wait until every added job has ended, or ``timeout`` s have passed (those left are counted unfinished)."""
    last = time.time()
    left = [(q, j) for j, _, q, _ in added]
    while True:
        left = await _unfinished(client, prefix, left)
        if not left or time.time() - last > timeout:
            break
        await asyncio.sleep(0.2)
    if left:
        logger.warning("%d job(s) of run %s had not ended %.0f s after the last arrival: counted unfinished",
                       len(left), run_id, timeout)


def _run_summary(jobs: Any, scenario: Scenario, *, mapping: Mapping[str, str], run_id: str,
                 added: Sequence[tuple[str, str, str, float]], seed: int, t0: float) -> Summary:
    """The Summary of this run's jobs among those read from BullMQ (ids without the queue where several
    queues were read); an added job not read back is lost."""
    several = len(set(mapping.values())) > 1
    ids = jobs["job_id"].str.split(":", n=1).str[-1] if several else jobs["job_id"]
    mine = ids.str.startswith(run_id + "-")
    jobs = jobs[mine].assign(job_id=ids[mine])
    found = set(jobs["job_id"])
    lost = [row for row in added if row[0] not in found]
    return summary_from_measured(jobs, scenario=scenario.name, seed=seed, t0=t0, warmup=scenario.warmup, lost=lost,
                                 window=scenario.window_length)


async def _run_live(redis_url: str, prefix: str, workers: Any, scenario: Scenario, plan: Sequence[Any], *,
                    mapping: Mapping[str, str], run_id: str, added: list[tuple[str, str, str, float]],
                    progress: Callable[[float], None] | None, drain_timeout: float) -> tuple[float, float]:
    """Add the planned jobs and wait for them to end (the started ``workers``, if any, running and then
    stopped); the wall-clock start and the seconds the run lasted (on the event loop's clock)."""
    from qsim.bullmq.producer import BullMQProducer

    producer = BullMQProducer(redis_url, prefix=prefix)
    ended = 0.0
    try:
        t0 = time.time()
        loop_t0 = asyncio.get_running_loop().time()
        if workers is not None:
            workers.begin(loop_t0)
        await _add_planned(producer, scenario, plan, mapping=mapping, run_id=run_id, t0=t0, added=added,
                           progress=progress)
        await _drain(producer.client, prefix, added, timeout=drain_timeout, run_id=run_id)
        ended = asyncio.get_running_loop().time() - loop_t0
    finally:
        try:
            if workers is not None:
                await workers.stop()
        finally:
            await producer.close()
    return t0, ended


class _LiveRun(NamedTuple):
    """One live run on BullMQ: its run id, the jobs added (id, type, queue, planned enqueue time), the workers
    qsim started (or None), its wall-clock start and how long it lasted."""

    run_id: str
    added: list[tuple[str, str, str, float]]
    workers: Any
    t0: float
    ended: float


async def _compared(model: Summary, measured: Summary, scenario: Scenario, *, seed: int, max_jobs: int | None,
                    autoscaled: bool) -> Comparison:
    """The model's Summary against BullMQ's: with the model's window bands over other seeds where the windows
    are checked, and the autoscaling agreement when the workers were autoscaled."""
    doc = compare_summaries(model, measured)
    runs = None
    if wants_bands(scenario):  # the windows are checked: give the model's windows their bands over other seeds
        runs = await asyncio.to_thread(add_bands, doc, scenario, seed=seed, max_jobs=max_jobs)
    if autoscaled:
        from qsim.analysis.fidelity.autoscaling import autoscaling_agreement
        from qsim.results.windows import window_bands

        doc["autoscaling"] = autoscaling_agreement(model, measured, duration=scenario.duration,
                                                   bands=window_bands(runs, "wait_p95") if runs else (),
                                                   replications=len(runs) if runs else 0)
    return doc


async def compare_bullmq_async(scenario: Scenario, redis_url: str, *, queues: Sequence[str],
                               prefix: str = DEFAULT_PREFIX, seed: int | None = None, max_jobs: int | None = None,
                               drain_timeout: float | None = None, run_id: str | None = None,
                               progress: Callable[[float], None] | None = None,
                               worker_command: Sequence[str] | None = None,
                               logdir: str | Path | None = None) -> Comparison:
    """Model vs BullMQ on one scenario (see the module docstring); the ``qsim compare --json`` document.

    Args:
        scenario: The scenario (its pools describe your BullMQ workers, e.g. a calibrated one).
        redis_url: The Redis of the BullMQ queues (the caller checks it may be loaded).
        queues: ``--queue`` values (:func:`queue_map`).
        prefix: BullMQ's key prefix.
        seed, max_jobs: As for the model: the same draws drive both.
        drain_timeout: Seconds after the last arrival to wait for the jobs to end (default: from the
            model's settle time, as ``qsim compare``).
        run_id: Prefix of the job ids (default ``cmp-<random>``).
        progress: Called with the fraction of the arrivals added.
        worker_command: Start the workers: each process runs this command (an argument list; see
            :mod:`qsim.bullmq.autoscaling`), the autoscaled pools under the model's controllers.
        logdir: With ``worker_command``: where each process writes its output (default: a temporary folder).

    Raises:
        NotSupportedError: ``[[events]]`` or fan-out types; ``[[autoscalers]]`` without ``worker_command``,
            or reading a metric BullMQ has no gauge of.
        HarnessError: A worker process exited at start.
        EngineError: The ``bullmq`` package is missing, or BullMQ refused a job.
        RedisUnavailable: Redis cannot be reached.
    """
    from qsim.bullmq.producer import require_package
    from qsim.calibrate.bullmq_source import read_bullmq
    from qsim.harness.drain import predicted_drain
    from qsim.harness.plan import plan_jobs
    from qsim.model import simulate

    check_supported(scenario, compare=True)
    check_workers(scenario, worker_command)
    require_package()
    mapping = queue_map(scenario, queues)
    await asyncio.to_thread(_reach, redis_url)  # a wrong password or port is one sentence, before the model runs
    seed = scenario.seed if seed is None else seed
    model = await asyncio.to_thread(simulate, scenario, seed=seed, max_jobs=max_jobs)
    if drain_timeout is None:
        drain_timeout = predicted_drain(scenario, jobs=model.jobs).timeout
    plan = plan_jobs(scenario, seed=seed, max_jobs=max_jobs)
    first = run_id or f"cmp-{secrets.token_hex(4)}"

    async def once(attempt: int) -> tuple[_LiveRun, float]:
        """One live run; a run measured again (the machine paused this one) gets a new run id and new workers."""
        run_id = f"{first}-{attempt}" if attempt else first
        added: list[tuple[str, str, str, float]] = []
        workers = None
        if worker_command:
            from qsim.bullmq.autoscaling import BullMQWorkers

            workers = BullMQWorkers(scenario, redis_url, worker_command, queues=mapping, prefix=prefix,
                                    run_id=run_id, seed=seed, logdir=Path(logdir) if logdir else None)
            await workers.start()
        with PauseWatch() as watch:
            t0, ended = await _run_live(redis_url, prefix, workers, scenario, plan, mapping=mapping, run_id=run_id,
                                        added=added, progress=progress, drain_timeout=drain_timeout)
        return _LiveRun(run_id, added, workers, t0, ended), watch.longest

    (run_id, added, workers, t0, ended), pauses = await remeasured(once, "BullMQ")
    if progress is not None:
        progress(1.0)
    measured, _now, _start = await asyncio.to_thread(read_bullmq, redis_url, sorted(set(mapping.values())),
                                                      prefix=prefix, since=t0 - 1.0, max_jobs=max(200_000, 2 * len(added)))
    summary = _run_summary(measured.jobs, scenario, mapping=mapping, run_id=run_id, added=added, seed=seed, t0=t0)
    autoscaled = workers is not None and bool(workers.scalers)
    if workers is not None and autoscaled:
        summary["autoscaling"] = workers.sections(ended)
    doc = await _compared(model.summary, summary, scenario, seed=seed, max_jobs=max_jobs, autoscaled=autoscaled)
    doc["ratios"]["utilization"] = None  # not measured on BullMQ
    if paused := paused_part(pauses):
        doc["paused"] = paused
    doc["bullmq"] = {"queues": mapping, "prefix": prefix, "run_id": run_id, "added": len(added),
                     "source": measured.source, "notes": notes(scenario),
                     "worker_command": list(worker_command) if worker_command else None}
    return doc


def compare_bullmq(scenario: Scenario, redis_url: str, **options: Any) -> Comparison:
    """:func:`compare_bullmq_async` from sync code (inside a running event loop it runs in a worker thread)."""
    from qsim.harness.aio import run_sync

    return run_sync(lambda: compare_bullmq_async(scenario, redis_url, **options))
