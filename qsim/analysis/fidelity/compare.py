"""Model and engine side by side: the same Summary fields, and their ratios.

:func:`compare` / ``await`` :func:`compare_async` run a scenario on both and
return the ``qsim compare --json`` document as a :class:`Comparison` (a dict
that shows as a table in Jupyter); :func:`compare_summaries` builds it from
two Summaries, and :meth:`Comparison.checked` adds the ``--check`` verdicts.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from qsim.analysis.fidelity.check import Tolerance, check, check_document, judge_slos, unit_of
from qsim.autoscale.build import Advisors
from qsim.harness.pauses import REMEASURE, paused_part, remeasured
from qsim.results.display import num, page, para, table
from qsim.results.summary import field_value
from qsim.spec.scenario import Scenario

if TYPE_CHECKING:
    from qsim.harness.run import EngineResult

__all__ = ["RATIO_FIELDS", "KEY_FIELDS", "ratios", "compare_summaries", "field_value", "compare", "compare_async",
           "Comparison", "band_seeds", "BAND_JOBS", "add_bands", "wants_bands", "REMEASURE", "paused_note"]


#: Summary fields compared, as dotted paths.
RATIO_FIELDS = (
    "throughput", "utilization",
    "wait.mean", "wait.p50", "wait.p95", "wait.p99",
    "latency.mean", "latency.p50", "latency.p95", "latency.p99",
    "jobs.completed", "jobs.dead", "jobs.failed_attempts", "jobs.stalled",
)


#: The figures a reader looks at first, in this order (then the rest of :data:`RATIO_FIELDS`).
KEY_FIELDS = ("throughput", "wait.p50", "wait.p95", "latency.p50", "latency.p95",
              "jobs.completed", "jobs.dead", "jobs.lost", "jobs.unfinished")


def ratios(model: Mapping[str, Any], engine: Mapping[str, Any]) -> dict[str, float | None]:
    """engine / model for each of :data:`RATIO_FIELDS` (None where the model's value is 0 or missing)."""
    out: dict[str, float | None] = {}
    for path in RATIO_FIELDS:
        m, e = field_value(model, path), field_value(engine, path)
        out[path] = float(e) / float(m) if isinstance(m, (int, float)) and isinstance(e, (int, float)) and m else None
    return out


def compare_summaries(model: Mapping[str, Any], engine: Mapping[str, Any]) -> Comparison:
    """The ``qsim compare --json`` document: ``{"model", "engine", "ratios"}``."""
    return Comparison({"model": model, "engine": engine, "ratios": ratios(model, engine)})


class Comparison(dict[str, Any]):
    """The ``qsim compare --json`` document (``model``, ``engine``, ``ratios``; ``bands`` when the model's windows
    carry bands over other seeds; once checked, ``check``).

    A plain dict to JSON; ``repr`` is one line of the key figures and, in
    Jupyter, a table: model and engine side by side with engine/model and,
    when checked, the tolerance and the verdict of each quantity.
    """

    def checked(self, tolerances: Mapping[str, Tolerance] | None = None, *,
                scenario: Scenario | None = None, slos: Sequence[Any] = ()) -> Comparison:
        """A copy with the ``check`` part of ``qsim compare --check`` (see :func:`qsim.analysis.fidelity.check.check`);
        ``slos`` (text like ``"p95_wait<=2 in 95% of windows"`` or SLOs) must be met by the engine's run too."""
        from qsim.analysis.slo.language import parse_slo

        rows = check(self["model"], self["engine"], tolerances, scenario=scenario,
                     band_replications=int((self.get("bands") or {}).get("replications", 0)))
        goals = [parse_slo(s) if isinstance(s, str) else s for s in slos]
        return Comparison({**self, "check": check_document(rows, judge_slos(goals, self["model"], self["engine"]))})

    @property
    def passed(self) -> bool | None:
        """Whether every checked quantity is within tolerance (None: not checked)."""
        return None if "check" not in self else bool(self["check"]["passed"])

    def quantities(self) -> list[str]:
        """The rows of the table: the key figures, the other ratios, the checked extras, then per type and queue."""
        checked = [q["quantity"] for q in self.get("check", {}).get("quantities", [])]
        per = [f"by_type.{t}.{w}.p95" for t in self["model"].get("by_type", {}) for w in ("wait", "latency")]
        per += [f"by_queue.{q}.{k}" for q in self["model"].get("by_queue", {}) for k in ("wait.p95", "max_depth")]
        extra = [q for q in checked if q not in per]
        return list(dict.fromkeys([*KEY_FIELDS, *RATIO_FIELDS, *extra, *per]))

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame: quantity, model, engine, engine/model, tolerance, verdict."""
        verdicts = {q["quantity"]: q for q in self.get("check", {}).get("quantities", [])}
        rows = []
        for path in self.quantities():
            m, e = field_value(self["model"], path), field_value(self["engine"], path)
            if m is None and e is None and path not in verdicts:
                continue
            v = verdicts.get(path)
            ratio = e / m if isinstance(m, (int, float)) and isinstance(e, (int, float)) and m else None
            tol = "" if v is None else "-" if v["verdict"] == "skip" else \
                Tolerance(v["rel"], v["abs"], share=v.get("share", 1.0),
                          band=v.get("band_replications", 0)).describe(unit_of(path))
            rows.append({"quantity": path, "model": m, "engine": e, "engine/model": ratio, "tolerance": tol,
                         "verdict": "" if v is None else v["verdict"] + (f" ({v['note']})" if v["note"] else "")})
        return pd.DataFrame(rows, columns=["quantity", "model", "engine", "engine/model", "tolerance", "verdict"])

    def verdict_line(self) -> str:
        """``check passed: 8 of 8 quantities within tolerance``, the failures, or that it was not checked."""
        if "check" not in self:
            return "not checked (.checked() or qsim compare --check gives a verdict per quantity)"
        doc = self["check"]
        n = sum(q["verdict"] != "skip" for q in doc["quantities"]) + len(doc.get("slo", []))
        if doc["passed"]:
            return f"check passed: {n} of {n} quantities within tolerance" + (" and SLOs met" if doc.get("slo") else "")
        return f"check FAILED: {len(doc['failed'])} of {n} out of tolerance: {', '.join(doc['failed'])}"

    def _title(self) -> str:
        m = self["model"]
        return f"{m.get('scenario', '?')} (seed {m.get('seed', '?')}): model vs engine"

    def __repr__(self) -> str:
        def pair(path: str, unit: str) -> str:
            m, e = field_value(self["model"], path), field_value(self["engine"], path)
            r = self["ratios"].get(path)
            return f"{path} {num(m)} vs {num(e)}{unit}" + ("" if r is None else f" (x{r:.3g})")

        figures = ", ".join([pair("throughput", "/s"), pair("wait.p95", " s"), pair("latency.p95", " s")])
        lost = field_value(self["engine"], "jobs.lost")
        check_text = "" if "check" not in self else "; " + self.verdict_line().split(":")[0]
        return f"Comparison({self._title()}: {figures}; engine lost {num(lost)}{check_text})"

    def _repr_html_(self) -> str:
        f = self.frame()
        bad = [i for i, v in enumerate(f["verdict"]) if v.startswith("fail")]
        lost = field_value(self["engine"], "jobs.lost")
        lead = para(self.verdict_line() + f"; engine lost {num(lost)} job(s)", bold=self._title() + ":")
        if self.get("paused"):
            lead += para(paused_note(self["paused"], str(self["engine"].get("source") or "engine")), bold="Note:")
        return page(lead, table(list(f.columns), f.itertuples(index=False, name=None), bold=bad))


async def compare_async(scenario: Scenario | str | Path | None, redis_url: str | None = None, *,
                        seed: int | None = None, max_jobs: int | None = None, drain_timeout: float | None = None,
                        progress: Callable[[float], None] | None = None, keep: bool = False,
                        advisors: Advisors | None = None, bands: bool | None = None) -> Comparison:
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
        advisors: the recommendation of each autoscaler that scales on it, the same for both runs
            (:func:`qsim.advise.load.advisors`).
        bands: whether to run the model with other seeds (:func:`band_seeds`) and give the model's
            windows their ``bands`` (:func:`qsim.results.windows.with_bands`; the document's ``"bands"``
            says over which seeds), which ``--check`` and the autoscaling verdict judge windows by; None:
            when the scenario is autoscaled or its arrivals follow a rate profile.
    """
    from qsim.harness.drain import predicted_drain
    from qsim.harness.run import check_supported
    from qsim.model import simulate
    from qsim.scenarios import load

    s = scenario if isinstance(scenario, Scenario) else load(scenario)
    check_supported(s)
    recommend = (dict(advisors(s)) or None) if advisors is not None and s.autoscalers else None
    model = await asyncio.to_thread(simulate, s, seed=seed, max_jobs=max_jobs, recommend=recommend)
    if drain_timeout is None:
        drain_timeout = predicted_drain(s, jobs=model.jobs).timeout
    run = partial(_measured, s, seed=seed, max_jobs=max_jobs, drain_timeout=drain_timeout,
                  progress=progress, keep=keep, recommend=recommend)
    if redis_url is None:
        from qsim.harness.server import RedisServer

        with tempfile.TemporaryDirectory(prefix="qsim-redis-") as tmp:
            server = await asyncio.to_thread(RedisServer(Path(tmp)).start)
            try:
                engine, pauses = await run(server.url)
            finally:
                server.stop()
    else:
        engine, pauses = await run(redis_url)
    doc = compare_summaries(model.summary, engine.summary)
    if paused := paused_part(pauses):
        doc["paused"] = paused
    runs = await asyncio.to_thread(add_bands, doc, s, seed=seed, max_jobs=max_jobs, recommend=recommend) \
        if (wants_bands(s) if bands is None else bands) else None
    if s.autoscalers:
        from qsim.analysis.fidelity.autoscaling import autoscaling_agreement
        from qsim.results.windows import window_bands

        doc["autoscaling"] = autoscaling_agreement(model.summary, engine.summary, duration=s.duration,
                                                   bands=window_bands(runs, "wait_p95") if runs else (),
                                                   replications=len(runs) if runs else 0)
    return doc


def paused_note(paused: Mapping[str, Any], side: str = "engine") -> str:
    """What a comparison's ``paused`` part says: the machine paused the measured run (``side``: engine or
    bullmq), which was measured again."""
    runs = [float(x) for x in paused["runs"]]
    again = len(runs) - 1
    who = "BullMQ" if side == "bullmq" else "the engine"
    text = (f"this machine paused {who}'s run for {max(runs[:-1] or runs):.2f} s (a frozen virtual machine, "
            f"a process stopped or swapped out: not {who}'s doing)")
    if again:
        text += f"; measured again{f' {again} times' if again > 1 else ''}, the figures are the last run's"
    if runs[-1] >= float(paused["limit"]):
        text += f", which was paused too ({runs[-1]:.2f} s): its waits and throughput include the pause"
    return text


async def _measured(scenario: Scenario, url: str, **options: Any) -> tuple[EngineResult, list[float]]:
    """The engine's run of ``scenario`` on ``url``, measured again while the machine paused it
    (:func:`qsim.harness.pauses.remeasured`), and each run's longest pause."""
    from qsim.harness.run import run_scenario_async

    async def once(_attempt: int) -> tuple[EngineResult, float]:
        engine = await run_scenario_async(scenario, url, **options)
        return engine, engine.paused

    return await remeasured(once, "the engine")


def wants_bands(scenario: Scenario) -> bool:
    """Whether a comparison gives the model's windows bands by default: arrivals on a rate profile (the
    windows are checked) or autoscalers (their verdict judges windows)."""
    from qsim.analysis.plan.profile import time_varying

    return bool(scenario.autoscalers) or time_varying(scenario)


def add_bands(doc: dict[str, Any], scenario: Scenario, *, seed: int | None = None, max_jobs: int | None = None,
              recommend: Any = None) -> list[list[Any]]:
    """Run the model with :func:`band_seeds` and give ``doc["model"]``'s windows their ``bands``
    (:func:`qsim.results.windows.with_bands`), ``doc["bands"]`` = ``{"replications", "seeds"}``; returns each
    replication's windows."""
    from qsim.model import simulate
    from qsim.results.windows import with_bands

    seeds = band_seeds(scenario.seed if seed is None else seed, int(doc["model"]["jobs"]["arrived"]))
    runs = [simulate(scenario, seed=k, max_jobs=max_jobs, recommend=recommend, records=False).summary.get("windows")
            or [] for k in seeds]
    doc["model"] = {**doc["model"], "windows": with_bands(doc["model"].get("windows") or [], runs)}
    doc["bands"] = {"replications": len(seeds), "seeds": seeds}
    return runs


#: Model runs (jobs, all replications together) spent on the per-window bands of an autoscaled comparison.
BAND_JOBS = 400_000


def band_seeds(seed: int, jobs: int, *, most: int = 20, least: int = 5) -> list[int]:
    """The seeds of the model replications that give an autoscaled comparison its per-window bands:
    ``most`` of them, fewer for a large run (about :data:`BAND_JOBS` jobs in all), never under ``least``."""
    n = max(least, min(most, BAND_JOBS // max(jobs, 1)))
    return [seed + 1 + i for i in range(n)]


def compare(scenario: Scenario | str | Path | None, redis_url: str | None = None, *, seed: int | None = None,
            max_jobs: int | None = None, drain_timeout: float | None = None,
            progress: Callable[[float], None] | None = None, keep: bool = False,
            advisors: Advisors | None = None, bands: bool | None = None) -> Comparison:
    """:func:`compare_async` from sync code (inside a running event loop it runs in a worker thread)."""
    from qsim.harness.aio import run_sync

    return run_sync(lambda: compare_async(scenario, redis_url, seed=seed, max_jobs=max_jobs,
                                          drain_timeout=drain_timeout, progress=progress, keep=keep,
                                          advisors=advisors, bands=bands))
