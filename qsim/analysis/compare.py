"""Model and engine side by side: the same Summary fields, and their ratios.

:func:`compare` / ``await`` :func:`compare_async` run a scenario on both and
return the ``qsim compare --json`` document; :func:`compare_summaries` builds
it from two Summaries.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from qsim.scenario import Scenario

__all__ = ["RATIO_FIELDS", "ratios", "compare_summaries", "field_value", "compare", "compare_async"]

#: Summary fields compared, as dotted paths.
RATIO_FIELDS = (
    "throughput", "utilization",
    "wait.mean", "wait.p50", "wait.p95", "wait.p99",
    "latency.mean", "latency.p50", "latency.p95", "latency.p99",
    "jobs.completed", "jobs.dead", "jobs.failed_attempts", "jobs.stalled",
)


def field_value(summary: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of a Summary (None when absent)."""
    node: Any = summary
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def ratios(model: Mapping[str, Any], engine: Mapping[str, Any]) -> dict[str, float | None]:
    """engine / model for each of :data:`RATIO_FIELDS` (None where the model's value is 0 or missing)."""
    out: dict[str, float | None] = {}
    for path in RATIO_FIELDS:
        m, e = field_value(model, path), field_value(engine, path)
        out[path] = float(e) / float(m) if isinstance(m, (int, float)) and isinstance(e, (int, float)) and m else None
    return out


def compare_summaries(model: Mapping[str, Any], engine: Mapping[str, Any]) -> dict[str, Any]:
    """The ``qsim compare --json`` document: ``{"model", "engine", "ratios"}``."""
    return {"model": model, "engine": engine, "ratios": ratios(model, engine)}


async def compare_async(scenario: Scenario | str | Path | None, redis_url: str | None = None, *,
                        seed: int | None = None, max_jobs: int | None = None, drain_timeout: float | None = None,
                        progress: Callable[[float], None] | None = None, keep: bool = False) -> dict[str, Any]:
    """Run ``scenario`` on the model and on the engine; the ``qsim compare --json`` document.

    ``await compare_async("workshop")`` in a notebook. The model runs first (in
    a thread); its settle time sets the engine run's default drain timeout
    (:mod:`qsim.harness.drain`).

    Args:
        scenario: A Scenario, a TOML path or a built-in name (None: ``workshop``).
        redis_url: The Redis to run on; None starts a throwaway ``redis-server``
            on a free port for the length of the call (nothing existing is touched).
        seed, max_jobs, drain_timeout, progress, keep: As for
            :func:`qsim.harness.run.run_scenario_async`.
    """
    from qsim.harness.drain import predicted_drain
    from qsim.harness.run import check_supported, run_scenario_async
    from qsim.model import simulate
    from qsim.scenarios import load

    s = scenario if isinstance(scenario, Scenario) else load(scenario)
    check_supported(s)
    model = await asyncio.to_thread(simulate, s, seed=seed, max_jobs=max_jobs)
    if drain_timeout is None:
        drain_timeout = predicted_drain(s, jobs=model.jobs).timeout
    if redis_url is None:
        from qsim.harness.server import RedisServer

        with tempfile.TemporaryDirectory(prefix="qsim-redis-") as tmp:
            server = await asyncio.to_thread(RedisServer(Path(tmp)).start)
            try:
                engine = await run_scenario_async(s, server.url, seed=seed, max_jobs=max_jobs,
                                                  drain_timeout=drain_timeout, progress=progress, keep=keep)
            finally:
                server.stop()
    else:
        engine = await run_scenario_async(s, redis_url, seed=seed, max_jobs=max_jobs, drain_timeout=drain_timeout,
                                          progress=progress, keep=keep)
    return compare_summaries(model.summary, engine.summary)


def compare(scenario: Scenario | str | Path | None, redis_url: str | None = None, *, seed: int | None = None,
            max_jobs: int | None = None, drain_timeout: float | None = None,
            progress: Callable[[float], None] | None = None, keep: bool = False) -> dict[str, Any]:
    """:func:`compare_async` from sync code (inside a running event loop it runs in a worker thread)."""
    from qsim.harness.aio import run_sync

    return run_sync(lambda: compare_async(scenario, redis_url, seed=seed, max_jobs=max_jobs,
                                          drain_timeout=drain_timeout, progress=progress, keep=keep))
