"""The flat API a notebook uses: one verb per task, re-exported by :mod:`qsim` (``qsim.simulate`` ...).

Every verb that takes a system takes it as a :class:`~qsim.spec.scenario.Scenario`,
a TOML path or a built-in name alike (None: ``workshop``, as ``qsim simulate``
with no file); :func:`load` is that rule. Each verb that takes time has a
sync and an awaitable form, ``verb`` and ``verb_async``. Both work inside a
running event loop (Jupyter): the sync form of an engine verb then runs its
loop in a worker thread (:mod:`qsim.harness.aio`), the awaitable form of a
model verb runs it in a thread, so ``await`` keeps a kernel responsive::

    import qsim
    s = qsim.load("workshop")                      # or a path, or a Scenario
    r = qsim.simulate(s, seed=3)                   # the model: r.summary, r.jobs
    e = await qsim.run_async("workshop")           # the engine on a throwaway redis-server
    doc = qsim.compare("workshop")                 # both, side by side (``qsim compare``)
    qsim.compare(r, e).checked(scenario=s)         # two runs you have, with ``--check``'s verdicts
    p = qsim.plan(s, "p95_wait<=2", {"pools.craftsmen.concurrency": "1:8"})
    qsim.theory(s), qsim.sweep(s, {...}), qsim.calibrate("jobs.csv"), qsim.advise(url, "orders", "p95_wait<=2")
    qsim.plots.wait_distribution(r.jobs)

| verb | sync | awaitable | what |
|---|---|---|---|
| load | :func:`load` | | a Scenario from a Scenario, a path or a name |
| simulate | :func:`simulate` | :func:`simulate_async` | the model (:func:`qsim.model.simulate`) |
| run | :func:`run` | :func:`run_async` | the engine (:func:`qsim.harness.run_scenario_async`) |
| compare | :func:`compare` | :func:`compare_async` | model and engine side by side |
| plan | :func:`plan` | :func:`plan_async` | the cheapest setting that meets SLOs |
| sweep | :func:`sweep` | :func:`sweep_async` | the model over a grid of settings |
| calibrate | :func:`calibrate` | :func:`calibrate_async` | measured jobs -> a Scenario |
| probe | :func:`probe` | :func:`probe_async` | the engine's per-job overhead here |
| advise | :func:`advise` | :func:`advise_async` | workers a running queue needs now |
| theory | :func:`theory` | | closed forms (Erlang C, Allen-Cunneen, Cobham) |
| autoscaling | :func:`autoscaling` | :func:`autoscaling_async` | autoscaling policies against an SLO (``qsim autoscale``; the name ``qsim.autoscale`` is the controllers' package) |
| manifest | :func:`manifest` | | a policy as a KEDA ScaledObject or an HPA |
| load_k8s | :func:`load_k8s` | | a cluster's ScaledObject or HPA and Deployment, read as the scenario's |

``qsim.plots`` is :mod:`qsim.analysis.plots`. A new verb is defined here and
named in ``qsim.__init__``'s ``_LAZY`` and ``__all__`` (the test of the public
API holds them to each other). A verb named as a subpackage (``calibrate``,
``advise``; ``autoscale`` next) is that package made callable
(:func:`qsim.callable_module.make_callable`): Python rebinds ``qsim.<name>`` to
the subpackage when it is first imported, so a plain function would not last.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from qsim.spec.scenario import Scenario

if TYPE_CHECKING:
    from qsim.advise import Advice
    from qsim.analysis.autoscaling.contest import AutoscaleResult
    from qsim.analysis.fidelity.compare import Comparison
    from qsim.analysis.plan import PlanResult
    from qsim.analysis.slo.language import SLO
    from qsim.analysis.theory import TheoryResult
    from qsim.autoscale.k8s_read import K8sRead
    from qsim.calibrate import Calibration
    from qsim.calibrate.overhead import Overhead
    from qsim.harness.run import EngineResult
    from qsim.model import ModelResult

__all__ = ["ScenarioLike", "load", "save", "with_params", "simulate", "simulate_async", "run", "run_async", "compare",
           "compare_async", "plan", "plan_async", "sweep", "sweep_async", "calibrate", "calibrate_async", "probe",
           "probe_async", "advise", "advise_async", "theory", "autoscaling", "autoscaling_async", "manifest",
           "load_k8s"]

#: What a verb takes as the system: a Scenario, a TOML path, a built-in name, or None (``workshop``).
ScenarioLike = Scenario | str | os.PathLike[str] | None
Progress = Callable[[float], None]


def load(scenario: ScenarioLike = None) -> Scenario:
    """A Scenario from a Scenario (as it is), a TOML path or a built-in name (None: ``workshop``).

    Raises:
        ScenarioError: no such file or built-in name, or the file is not a valid scenario.
    """
    if isinstance(scenario, Scenario):
        return scenario
    from qsim.scenarios import load as load_file

    return load_file(os.fspath(scenario) if scenario is not None else None)


def save(scenario: ScenarioLike, path: str | os.PathLike[str]) -> Path:
    """Write a scenario as a TOML file that ``qsim simulate PATH`` runs as is; returns the path.

    The folder must exist; the file is replaced in one step (a failure leaves the old one).

    Raises:
        ScenarioError: the scenario holds what TOML cannot (a name with a lone surrogate).
        UsageError: the folder is missing or cannot be written.
    """
    from qsim.spec.toml_writer import write_toml

    return write_toml(load(scenario), Path(path))


def with_params(scenario: ScenarioLike, params: Mapping[str, Any]) -> Scenario:
    """The scenario with dotted paths set (``{"pools.p.concurrency": 8, "duration": 600}``), as ``--vary`` sets them."""
    from qsim.analysis.plan.sweep import with_params as set_params

    return set_params(load(scenario), params)


# --------------------------------------------------------------------------- the model


def simulate(scenario: ScenarioLike = None, *, seed: int | None = None, max_jobs: int | None = None,
             records: bool = True, progress: Progress | None = None) -> ModelResult:
    """Simulate the scenario on the model (``qsim simulate``): a :class:`~qsim.model.ModelResult`.

    Args:
        seed: overrides the scenario's; the same seed gives identical records.
        max_jobs: stop arrivals after this many jobs.
        records: False keeps only the Summary (flat memory; see :func:`qsim.model.simulate`).
        progress: called now and then with the fraction of jobs settled.
    """
    from qsim.model import simulate as run_model

    s = load(scenario)
    return run_model(s, seed=seed, max_jobs=max_jobs, progress=progress, records=records, recommend=_advisors(s))


def _advisors(s: Scenario) -> Any:
    """The ``qsim`` autoscalers' advisors (:func:`qsim.advise.load.advisors`), None without any."""
    if not s.autoscalers:
        return None
    from qsim.advise.load import advisors

    return advisors(s) or None


async def simulate_async(scenario: ScenarioLike = None, *, seed: int | None = None, max_jobs: int | None = None,
                         records: bool = True, progress: Progress | None = None) -> ModelResult:
    """:func:`simulate` in a worker thread: ``await`` it and the event loop (a kernel) stays responsive."""
    s = load(scenario)
    return await asyncio.to_thread(simulate, s, seed=seed, max_jobs=max_jobs, records=records, progress=progress)


def theory(scenario: ScenarioLike = None) -> TheoryResult:
    """The closed forms that apply to the scenario (``qsim theory``).

    Raises:
        TheoryNotApplicable: no closed form describes it (the message says why).
    """
    from qsim.analysis.theory import predict

    return predict(load(scenario))


def _values(vary: Mapping[str, Sequence[Any] | str]) -> dict[str, list[Any]]:
    """``vary`` with ``"1:64"``-style strings (as ``--vary`` takes them) turned into their values."""
    from qsim.analysis.plan.sweep import parse_values

    return {path: parse_values(v) if isinstance(v, str) else list(v) for path, v in vary.items()}


def sweep(scenario: ScenarioLike, vary: Mapping[str, Sequence[Any] | str], **options: Any) -> list[dict[str, Any]]:
    """The model at every combination of ``vary`` (values as a list or ``"1:64"``): ``[{"params", "summary"}]``.

    ``options``: those of :func:`qsim.analysis.plan.sweep.sweep` (``seed``, ``max_jobs``, ``processes``,
    ``replications``, ``client``, ``progress``).
    """
    from qsim.analysis.plan.sweep import sweep as run_sweep

    return run_sweep(load(scenario), _values(vary), **options)


async def sweep_async(scenario: ScenarioLike, vary: Mapping[str, Sequence[Any] | str],
                      **options: Any) -> list[dict[str, Any]]:
    """:func:`sweep` in a worker thread."""
    s = load(scenario)
    return await asyncio.to_thread(sweep, s, vary, **options)


def plan(scenario: ScenarioLike, slo: str | SLO | Sequence[str | SLO], vary: Mapping[str, Sequence[Any] | str],
         **options: Any) -> PlanResult:
    """The cheapest setting of ``vary`` that meets every SLO (``qsim plan``): a
    :class:`~qsim.analysis.plan.report.PlanResult`.

    ``slo``: ``"p95_wait<=2"``, or several; ``vary``: dotted paths to values (a list, or
    ``"1:64"``). ``options``: those of :func:`qsim.analysis.plan.planner.plan` (``replications``,
    ``search``, ``minimize``, ``confidence``, ``seed``, ``max_jobs``, ``processes``, ``client``,
    ``progress``).
    """
    from qsim.analysis.plan import plan as run_plan
    from qsim.analysis.slo.language import SLO, parse_slo

    slos = [slo] if isinstance(slo, (str, SLO)) else list(slo)
    return run_plan(load(scenario), [s if isinstance(s, SLO) else parse_slo(s) for s in slos], _values(vary),
                    **options)


async def plan_async(scenario: ScenarioLike, slo: str | SLO | Sequence[str | SLO],
                     vary: Mapping[str, Sequence[Any] | str], **options: Any) -> PlanResult:
    """:func:`plan` in a worker thread."""
    s = load(scenario)
    return await asyncio.to_thread(plan, s, slo, vary, **options)


# --------------------------------------------------------------------------- the engine


async def run_async(scenario: ScenarioLike = None, redis_url: str | None = None, *, seed: int | None = None,
                    max_jobs: int | None = None, drain_timeout: float | None = None,
                    progress: Progress | None = None, keep: bool = False,
                    logdir: str | Path | None = None) -> EngineResult:
    """Run the scenario on the real engine (``qsim run``): an :class:`~qsim.harness.run.EngineResult`.

    Args:
        redis_url: the Redis to run on; None starts a throwaway ``redis-server`` on a free port
            for the length of the call (nothing existing is touched).
        seed, max_jobs, drain_timeout, progress, keep, logdir: as for
            :func:`qsim.harness.run_scenario_async` (``keep`` needs a ``redis_url``: a
            throwaway server's keys end with the call).
    """
    from qsim.harness.run import run_scenario_async

    s = load(scenario)

    def on(url: str) -> Coroutine[Any, Any, EngineResult]:
        return run_scenario_async(s, url, seed=seed, max_jobs=max_jobs, drain_timeout=drain_timeout,
                                  progress=progress, keep=keep, logdir=logdir, recommend=_advisors(s))

    if redis_url is not None:
        return await on(redis_url)
    if keep:
        raise ValueError("keep=True needs a redis_url: a throwaway server's keys end with the call "
                         "(start one that lasts with qsim.RedisServer().start())")
    from qsim.harness.server import RedisServer

    server = await asyncio.to_thread(RedisServer().start)
    try:
        return await on(server.url)
    finally:
        await asyncio.to_thread(server.stop)


def run(scenario: ScenarioLike = None, redis_url: str | None = None, *, seed: int | None = None,
        max_jobs: int | None = None, drain_timeout: float | None = None, progress: Progress | None = None,
        keep: bool = False, logdir: str | Path | None = None) -> EngineResult:
    """:func:`run_async` from sync code (inside a running event loop it runs in a worker thread)."""
    from qsim.harness.aio import run_sync

    s = load(scenario)
    return run_sync(lambda: run_async(s, redis_url, seed=seed, max_jobs=max_jobs, drain_timeout=drain_timeout,
                                      progress=progress, keep=keep, logdir=logdir))


def _summary(run: Any) -> Mapping[str, Any] | None:
    """The Summary of a model or engine result, or a Summary itself; None for anything else."""
    if isinstance(run, Mapping) and "jobs" in run and "source" in run:
        return run  # a Summary dict
    summary = getattr(run, "summary", None)
    return summary if isinstance(summary, Mapping) else None


def compare(scenario: Any = None, redis_url: Any = None, **options: Any) -> Comparison:
    """Model and engine side by side (``qsim compare``): a :class:`~qsim.analysis.fidelity.compare.Comparison`.

    ``compare(scenario, redis_url=None, ...)`` runs the scenario on both (``redis_url`` None: a
    throwaway ``redis-server``; ``options``: ``seed``, ``max_jobs``, ``drain_timeout``,
    ``progress``, ``keep``). ``compare(model, engine)`` compares two runs you have (results or
    Summaries), running nothing. ``.checked(scenario=...)`` adds ``--check``'s verdicts.
    """
    pair = _pair(scenario, redis_url, options)
    if pair is not None:
        return pair
    from qsim.advise.load import advisors
    from qsim.analysis.fidelity.compare import compare as run_both

    return run_both(load(scenario), redis_url, **{"advisors": advisors, **options})


async def compare_async(scenario: Any = None, redis_url: Any = None, **options: Any) -> Comparison:
    """:func:`compare`, awaitable (the engine run on this loop, the model in a thread)."""
    pair = _pair(scenario, redis_url, options)
    if pair is not None:
        return pair
    from qsim.advise.load import advisors
    from qsim.analysis.fidelity.compare import compare_async as run_both

    return await run_both(load(scenario), redis_url, **{"advisors": advisors, **options})


def _pair(first: Any, second: Any, options: Mapping[str, Any]) -> Comparison | None:
    """The comparison of two runs given as results or Summaries; None when ``first`` is a scenario."""
    model = _summary(first)
    if model is None:
        return None
    engine = _summary(second)
    if engine is None or options:
        raise TypeError("compare(model, engine) takes two results or Summaries and no options, "
                        f"got {type(second).__name__} and {sorted(options)}")
    from qsim.analysis.fidelity.compare import compare_summaries

    return compare_summaries(model, engine)


# --------------------------------------------------------------------------- autoscaling


def autoscaling(scenario: ScenarioLike, slo: str | SLO, **options: Any) -> AutoscaleResult:
    """Autoscaling policies against an SLO (``qsim autoscale``): the JSON document as a dict.

    ``options``: ``policies``, ``tune_policy`` (a policy or ``"all"``: tuned on the training seeds, judged on
    held-out ones), ``vary``, ``replications``, ``held_out``, ``budget``, ``seed``, ``pool``, ``static``,
    ``cost_per_worker_hour``, ``flap_size``, ``flap_window``, ``tie``, ``processes``, ``client``, ``progress``
    (:func:`qsim.analysis.autoscaling.contest.autoscale`);
    the ``qsim`` policy's advisors are :func:`qsim.advise.load.advisors`.
    """
    from qsim.advise.load import advisors
    from qsim.analysis.autoscaling.contest import autoscale as run_policies

    return run_policies(load(scenario), slo, **{"advisors": advisors, **options})


async def autoscaling_async(scenario: ScenarioLike, slo: str | SLO, **options: Any) -> AutoscaleResult:
    """:func:`autoscaling` in a worker thread."""
    s = load(scenario)
    return await asyncio.to_thread(autoscaling, s, slo, **options)


def manifest(kind: str, scenario: ScenarioLike, policy: Mapping[str, Any] | None = None, *, pool: str | None = None,
             note: str = "", target: str = "qsim", prefix: str = "bull") -> str:
    """A KEDA ScaledObject (``kind="keda"``) or an HPA (``"hpa"``) of an autoscaler, as YAML text.

    ``policy``: the autoscaler's TOML keys (an :func:`autoscaling` document's ``tuned["params"]`` or a
    policy's ``params``); None: the scenario's own autoscaler of ``pool`` (its first one by default).
    ``target``: whose queue the trigger reads, ``"qsim"`` or ``"bullmq"`` (keys under ``prefix``);
    ``qsim autoscale --emit`` writes it with the Deployments it needs (:func:`qsim.autoscale.emit.emit`).
    """
    from qsim.analysis.autoscaling.contest import policy_table
    from qsim.analysis.autoscaling.runs import autoscaled_pool
    from qsim.autoscale.manifest import manifest as write

    s = load(scenario)
    name = autoscaled_pool(s, pool)
    return write(kind, s, name, policy if policy is not None else policy_table(s, name), note=note, target=target,
                 prefix=prefix)


def load_k8s(files: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], scenario: ScenarioLike = None, *,
             pool: str | None = None, slo: str | None = None, ignore_unknown: bool = False) -> K8sRead:
    """A cluster's autoscaler (a KEDA ScaledObject or an autoscaling/v2 HPA) and its worker Deployment, read
    as the scenario's ``[[autoscalers]]`` table and pool settings (``qsim autoscale --k8s``).

    ``files``: YAML files (several documents each is fine); ``scenario``: whose pool they scale (``pool``,
    default its first autoscaled pool, else its only one; the objects' queues are checked against it);
    ``slo``: the advisor's SLO when the Deployment carries no ``--advise-slo``; ``ignore_unknown``: list the
    fields qsim cannot honour in ``ignored`` instead of raising. The result's ``autoscaler`` is a table
    ``Scenario.from_dict`` accepts; :func:`qsim.autoscale.k8s_read.apply_k8s` puts it into the scenario.

    Raises:
        ScenarioError: a field qsim cannot honour or a value outside the Kubernetes/KEDA API's range,
            naming the file, the object and the field.
    """
    from qsim.analysis.autoscaling.runs import autoscaled_pool
    from qsim.autoscale.k8s_read import apply_k8s, read_objects

    s = load(scenario)
    name = autoscaled_pool(s, pool)
    paths = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    read = read_objects(paths, s.pool(name).queues, slo=slo, ignore_unknown=ignore_unknown)
    apply_k8s(s, name, read)  # raises if the scenario does not accept what was read
    return read


# --------------------------------------------------------------------------- measured jobs


def calibrate(data: pd.DataFrame | str | os.PathLike[str], queues: str | Sequence[str] | None = None, *,
              source: str | None = None, **options: Any) -> Calibration:
    """Measured jobs -> a Scenario that predicts them (``qsim calibrate``): a :class:`~qsim.calibrate.Calibration`.

    ``data``: a DataFrame of jobs, a CSV file, or a Redis URL (then ``queues`` names the queues);
    ``source``: ``"qsim"`` (the default for a URL), ``"bullmq"``, ``"csv"`` or ``"frame"``. See
    :func:`qsim.calibrate.from_any` (``qsim.calibrate`` is that package, callable as this verb).
    """
    from qsim.calibrate import from_any

    return from_any(data, queues, source=source, **options)


async def calibrate_async(data: pd.DataFrame | str | os.PathLike[str], queues: str | Sequence[str] | None = None,
                          *, source: str | None = None, **options: Any) -> Calibration:
    """:func:`calibrate` in a worker thread."""
    return await asyncio.to_thread(calibrate, data, queues, source=source, **options)


def probe(redis_url: str | None = None, **options: Any) -> Overhead:
    """The engine's per-job overhead on this Redis and machine (``qsim calibrate --probe``).

    ``redis_url`` None: a throwaway ``redis-server`` for the call. ``options``: ``duration``,
    ``rate``, ``concurrency``, ``progress`` (:func:`qsim.calibrate.probe`). Keys of its own,
    deleted afterwards.
    """
    from qsim.calibrate.probe import probe as run_probe

    if redis_url is not None:
        return run_probe(redis_url, **options)
    from qsim.harness.server import RedisServer

    with tempfile.TemporaryDirectory(prefix="qsim-probe-") as tmp, RedisServer(Path(tmp)) as server:
        return run_probe(server.url, **options)


async def probe_async(redis_url: str | None = None, **options: Any) -> Overhead:
    """:func:`probe` in a worker thread."""
    return await asyncio.to_thread(probe, redis_url, **options)


def advise(url: str, queues: str | Sequence[str], slo: str | SLO | Sequence[str | SLO],
           **options: Any) -> Advice:
    """Workers a running queue needs now to meet its SLOs (``qsim advise``): an :class:`~qsim.advise.Advice`.

    Reads ``url`` (a Redis URL) only. ``options``: those of :func:`qsim.advise.advise` (``window``,
    ``source``, ``prefix``, ``concurrency``, ``max_workers``, ``replications``, ...);
    ``qsim.advise`` is that package, callable as this verb.
    """
    from qsim.advise import advise as run_advise

    return run_advise(url, queues, slo, **options)


async def advise_async(url: str, queues: str | Sequence[str], slo: str | SLO | Sequence[str | SLO],
                       **options: Any) -> Advice:
    """:func:`advise` in a worker thread."""
    return await asyncio.to_thread(advise, url, queues, slo, **options)
