"""Model vs a BullMQ deployment: ``qsim compare SCENARIO --target bullmq --redis URL --queue Q``.

:func:`compare_bullmq_async` runs the scenario on the model, then drives the
very same arrivals (the scenario's drawn workload, :func:`qsim.harness.plan.plan_jobs`)
into the BullMQ queues in real time, where your BullMQ workers take them;
waits until every job of the run has ended (or the drain timeout passed);
reads the jobs back with the calibrate BullMQ reader
(:func:`qsim.calibrate.bullmq_source.read_bullmq`); and returns the same
document as ``qsim compare`` (:class:`qsim.analysis.compare.Comparison`:
``model``, ``engine`` — here the BullMQ measurement, ``source`` ``"bullmq"`` —
and ``ratios``) with a ``bullmq`` part: the queues, the prefix, the run id
and what BullMQ does differently (:func:`qsim.bullmq.options.notes`).

Each job's data is the type's ``payload`` template rendered
(:mod:`qsim.templates`) when it has one, else the planned payload
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
from typing import Any

from qsim.analysis.compare import Comparison, compare_summaries
from qsim.bullmq.measure import summary_from_measured
from qsim.bullmq.options import DEFAULT_PREFIX, check_supported, child_options, job_options, notes, priorities
from qsim.errors import ScenarioError
from qsim.scenario import Scenario
from qsim.templates import render

__all__ = ["compare_bullmq", "compare_bullmq_async", "queue_map"]

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


async def compare_bullmq_async(scenario: Scenario, redis_url: str, *, queues: Sequence[str],
                               prefix: str = DEFAULT_PREFIX, seed: int | None = None, max_jobs: int | None = None,
                               drain_timeout: float | None = None, run_id: str | None = None,
                               progress: Callable[[float], None] | None = None) -> Comparison:
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

    Raises:
        NotSupportedError: ``[[events]]`` or fan-out types.
        EngineError: The ``bullmq`` package is missing, or BullMQ refused a job.
        RedisUnavailable: Redis cannot be reached.
    """
    from qsim.bullmq.producer import BullMQProducer, require_package
    from qsim.calibrate.bullmq_source import read_bullmq
    from qsim.harness.drain import predicted_drain
    from qsim.harness.plan import plan_jobs
    from qsim.model import simulate

    check_supported(scenario, compare=True)
    require_package()
    mapping = queue_map(scenario, queues)
    seed = scenario.seed if seed is None else seed
    model = await asyncio.to_thread(simulate, scenario, seed=seed, max_jobs=max_jobs)
    if drain_timeout is None:
        drain_timeout = predicted_drain(scenario, jobs=model.jobs).timeout
    plan = plan_jobs(scenario, seed=seed, max_jobs=max_jobs)
    run_id = run_id or f"cmp-{secrets.token_hex(4)}"
    prio = priorities(scenario)
    seen: dict[str, int] = {}
    added: list[tuple[str, str, str, float]] = []  # (job id, type, BullMQ queue, planned enqueue time)

    def data(job_type: str, job_id: str, n: int, planned: Any) -> Any:
        spec = scenario.job(job_type)
        if spec.payload is None:
            return planned
        return render(spec.payload, job_id=job_id, n=n, type=job_type, queue=spec.queue, run_id=run_id)

    producer = BullMQProducer(redis_url, prefix=prefix)
    try:
        t0 = time.time()
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
        last = time.time()
        left = [(q, j) for j, _, q, _ in added]
        while True:
            left = await _unfinished(producer.client, prefix, left)
            if not left or time.time() - last > drain_timeout:
                break
            await asyncio.sleep(0.2)
        if left:
            logger.warning("%d job(s) of run %s had not ended %.0f s after the last arrival: counted unfinished",
                           len(left), run_id, drain_timeout)
    finally:
        await producer.close()
    if progress is not None:
        progress(1.0)
    measured, _now, _start = await asyncio.to_thread(read_bullmq, redis_url, sorted(set(mapping.values())),
                                                      prefix=prefix, since=t0 - 1.0, max_jobs=max(200_000, 2 * len(added)))
    jobs = measured.jobs
    several = len(set(mapping.values())) > 1
    ids = jobs["job_id"].str.split(":", n=1).str[-1] if several else jobs["job_id"]
    mine = ids.str.startswith(run_id + "-")
    jobs = jobs[mine].assign(job_id=ids[mine])
    found = set(jobs["job_id"])
    lost = [row for row in added if row[0] not in found]
    summary = summary_from_measured(jobs, scenario=scenario.name, seed=seed, t0=t0, warmup=scenario.warmup,
                                    lost=lost)
    doc = compare_summaries(model.summary, summary)
    doc["ratios"]["utilization"] = None  # not measured on BullMQ
    doc["bullmq"] = {"queues": mapping, "prefix": prefix, "run_id": run_id, "added": len(added),
                     "source": measured.source, "notes": notes(scenario)}
    return doc


def compare_bullmq(scenario: Scenario, redis_url: str, **options: Any) -> Comparison:
    """:func:`compare_bullmq_async` from sync code (inside a running event loop it runs in a worker thread)."""
    from qsim.harness.aio import run_sync

    return run_sync(lambda: compare_bullmq_async(scenario, redis_url, **options))
