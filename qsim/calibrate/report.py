"""The calibration report: the Scenario and, for every fitted value, what it came from.

:class:`Calibration` is what :func:`qsim.calibrate.from_redis` and its
siblings return. In a notebook it shows as a table (``_repr_html_``); in a
terminal its ``repr`` is a few lines; :meth:`Calibration.as_json` is the
``qsim calibrate --json`` document and :meth:`Calibration.write` the
commented TOML (with the empirical and trace CSVs beside it).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from qsim.calibrate.arrivals import ArrivalFit
from qsim.calibrate.measured import Measured
from qsim.calibrate.overhead import Overhead
from qsim.calibrate.plots import write_plots
from qsim.calibrate.pools import PoolFit
from qsim.calibrate.service import ServiceFit
from qsim.calibrate.typefit import TypeFit
from qsim.errors import UsageError
from qsim.results.display import bullets, page, para, sig, table
from qsim.results.outpath import make_out_dir, out_file
from qsim.spec import dists
from qsim.spec.scenario import Scenario
from qsim.spec.toml_writer import to_toml, write_toml

__all__ = ["TypeFit", "Calibration", "with_paths"]


def _when(t: float) -> str:
    if t > 1e9:  # Unix time
        try:
            return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        except (ValueError, OverflowError, OSError):  # beyond the calendar datetime knows
            pass
    return f"{t:.6g} s"


def _service_text(s: ServiceFit) -> str:
    if s.kind in ("gamma", "lognormal", "empirical"):
        return f"{s.kind} mean {s.mean:.4g} s cv {s.cv:.3g}"
    return f"{s.kind} mean {s.mean:.4g} s"


def _arrival_text(a: ArrivalFit) -> str:
    extra = f" x{a.size}" if a.kind == "burst" else ""
    if a.profile is not None and a.drift is not None:
        d = a.drift
        jumps = f", {len(a.profile.jumps)} jump(s)" if a.profile.jumps else ""
        shape = {"steps": f"{d.segments} steps", "linear": f"linear, {len(a.profile.points)} knots{jumps}",
                 "daily": "daily"}[d.model]
        return (f"{a.kind}{extra} ({shape}) mean {a.rate:.4g}/s, latest {a.latest_rate:.4g}/s, "
                f"peak {a.peak_rate:.4g}/s")
    return f"{a.kind}{extra} {a.rate:.4g}/s"


def _arrival_comment(a: ArrivalFit) -> str:
    """The TOML comment above a fitted ``arrival``: what the kind was chosen from."""
    if a.kind == "trace":
        return f"the {a.n} measured enqueue times ({a.rate:.4g}/s on average)"
    text = (f"{a.n} arrivals in {a.span:.6g} s; counts in {a.windows} windows of {a.width:.3g} s: dispersion index "
            f"{a.dispersion:.3g} (p over {a.p_over:.2g}, under {a.p_under:.2g}); {a.batch_mean:.3g} jobs per batch of "
            f"simultaneous arrivals (p {a.p_batch:.2g}); test of one rate p {a.p_change:.2g}")
    if a.profile is not None and a.drift is not None:
        d = a.drift
        text += (f"\nrate profile ({d.model}, by BIC: " + ", ".join(f"{k} {v:.6g}" for k, v in d.bic.items())
                 + f"); counts within it: dispersion p {d.p_fit:.2g}; time 0 is the window's start")
    return text


@dataclass(frozen=True)
class Calibration:
    """A calibrated Scenario and the fits behind it.

    Attributes:
        scenario: The Scenario (job types named as in the source).
        types: The fits per job type.  pools: The observed pools.
        overhead: ``[engine] fetch_overhead`` / ``ack_overhead`` and their source.
        measured: The jobs the fits came from.  window: ``(start, end)`` enqueue times.
        warnings: What the reader should know (too few runs for a fit, assumptions).
    """

    scenario: Scenario
    types: dict[str, TypeFit]
    pools: tuple[PoolFit, ...]
    overhead: Overhead
    measured: Measured = field(repr=False)
    window: tuple[float, float] = (math.nan, math.nan)
    warnings: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Any]:
        """``scenario, report = from_redis(...)`` unpacks to the Scenario and this report."""
        return iter((self.scenario, self))

    # -- documents ------------------------------------------------------------
    def as_json(self, scenario: Scenario | None = None) -> dict[str, Any]:
        """``{"scenario": {...}, "fits": {TYPE: {...}}, "overhead": {...}, ...}`` (the ``--json`` document)."""
        s = scenario or self.scenario
        return {"scenario": s.to_dict(), "fits": {t: f.as_dict() for t, f in self.types.items()},
                "overhead": self.overhead.as_dict(), "pools": [p.as_dict() for p in self.pools],
                "window": {"start": self.window[0], "end": self.window[1], "seconds": self.window[1] - self.window[0]},
                "source": self.measured.source, "jobs": int(len(self.measured.jobs)),
                "measured": self.measured_summary(), "warnings": list(self.warnings)}

    def measured_summary(self) -> dict[str, Any]:
        """What the measured jobs themselves show (compare with ``qsim simulate`` of the scenario):
        jobs, completed, dead, throughput and the mean/p50/p95 of wait and latency (NaN where unknown)."""
        j = self.measured.jobs
        wait = (j["started"] - j["enqueued"]).dropna().to_numpy(float)
        done = j[j["outcome"] == "completed"]
        lat = (done["finished"] - done["enqueued"]).to_numpy(float)

        def stats(x: Any) -> dict[str, float]:
            if len(x) == 0:
                return {"mean": math.nan, "p50": math.nan, "p95": math.nan}
            return {"mean": float(x.mean()), "p50": float(np.percentile(x, 50)), "p95": float(np.percentile(x, 95))}

        span = self.window[1] - self.window[0]
        return {"jobs": int(len(j)), "completed": int(len(done)), "dead": int((j["outcome"] == "dead").sum()),
                "throughput": len(done) / span if span > 0 else math.nan, "wait": stats(wait), "latency": stats(lat)}

    def comments(self) -> dict[str, str]:
        """Comments for the TOML file, keyed by key path (see :func:`qsim.spec.toml_writer.to_toml`)."""
        c: dict[str, str] = {}
        start, end = self.window
        c["duration"] = f"the measured window: {len(self.measured.jobs)} jobs enqueued from {_when(start)} to {_when(end)}"
        c["seed"] = "any seed: the model draws its own sample of the fitted distributions"
        for i, (name, f) in enumerate(self.types.items()):
            k = f"jobs[{i}]"
            c[k] = f"job type {name!r}: {f.jobs} jobs" + "".join(f"\nnote: {n}" for n in f.notes)
            c[f"{k}.arrival"] = _arrival_comment(f.arrival)
            s = f.service
            less = f" less {sig(s.shift * 1e3, ' ms')} engine overhead" if s.shift else ""
            if s.kind == "empirical":
                c[f"{k}.service"] = f"the {s.n} measured runs{less} (mean {s.mean:.4g} s, cv {s.cv:.3g}); {s.note}"
            elif s.kind == "constant":
                c[f"{k}.service"] = f"{s.n} successful runs{less}: {s.note}"
            else:
                others = ", ".join(f"{kind} {v['ks']:.3g}" for kind, v in s.candidates.items() if kind != s.kind)
                c[f"{k}.service"] = (f"{s.kind} by maximum likelihood from {s.n} successful runs{less}; "
                                     f"KS {s.ks:.3g}, p {s.ks_p:.2g} by {s.p_method}; other fits' KS: {others}")
            fl = f.failures
            c[f"{k}.fail_prob"] = (f"{fl.failed_attempts} failed attempts, {fl.dead} dead of {fl.jobs} finished jobs; "
                                   f"95% CI [{fl.fail_ci[0]:.3g}, {fl.fail_ci[1]:.3g}]")
            c[f"{k}.poison_prob"] = f"95% CI [{fl.poison_ci[0]:.3g}, {fl.poison_ci[1]:.3g}]" if f.attempts > 1 else \
                "one attempt per job: a poison job and a failed attempt look the same (all in fail_prob)"
            c[f"{k}.priority"] = "from the jobs' options (most common value)"
        for i, p in enumerate(self.pools):
            c[f"pools[{i}]"] = (f"observed: {p.worker_ids} worker ids, at most {p.workers} at once, at most "
                                f"{p.concurrency} jobs at once per worker ({p.runs} runs); maxima seen, the "
                                f"configured values may be higher" + (f"\nnote: {p.note}" if p.note else ""))
        for i, q in enumerate(self.scenario.queues):
            c[f"queues[{i}]"] = "limits as stored in the queue's settings"
        o = self.overhead
        c["engine"] = f"the per-job overhead: {o.treatment}; from {o.source} (n = {o.n})" + \
            (f"\nnote: {o.note}" if o.note else "")
        c["engine.fetch_overhead"] = "slot held before the handler: the probe's mean pickup" if o.source == "probe" \
            else ("slot held before the handler: the mean pickup of jobs that found a slot free"
                  if o.fetch_overhead else "none measured here (see the table's note)")
        c["engine.ack_overhead"] = "the probe's in-slot time beyond the handler, less fetch_overhead" \
            if o.source == "probe" else "not observable in job records (part of the fitted service)"
        c["engine.pickup_latency"] = ("the mean pickup of jobs that found a slot free: not known to hold a slot, "
                                      "so it is waited without holding one") if o.pickup_latency else \
            "none (the pickup, if any, is fetch_overhead)"
        if o.redis is not None:
            c["engine.redis_cpu_per_job_us"] = (f"Redis CPU per job measured by the probe on this Redis "
                                                f"({o.redis.detail.get('commands_per_job', 0):.3g} commands per job): "
                                                f"qsim plan and autoscale report the share of a Redis core it implies")
            c["engine.redis_idle_us_per_worker"] = "Redis CPU per second of a waiting worker, measured by the probe"
        if o.by_load:
            c["engine.overhead_by_load"] = ("[utilization, fetch_overhead, ack_overhead] measured by the probe at "
                                            "each load; the model reads the row of the load it simulates")
        return c

    def header(self) -> str:
        """The TOML file's opening comment."""
        lines = [f"Calibrated by `qsim calibrate` from {self.measured.source or 'measured jobs'}.",
                 "Each fitted value says what it came from; `qsim simulate` runs this file as is."]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def write(self, path: str | Path, *, option: str | None = None) -> Scenario:
        """Write the scenario TOML to ``path``, empirical/trace CSVs beside it; returns the scenario as written.

        The folder must exist (:mod:`qsim.results.outpath`). Everything is checked before a file is
        written; if writing fails midway, the CSVs this call wrote are removed again and the
        TOML is either the new one whole or untouched.

        Raises:
            UsageError: the folder is missing or not writable (``option`` names the CLI option).
            ScenarioError: a name holds what TOML cannot (a lone surrogate), naming the key.
        """
        path = out_file(path, option)
        scenario = with_paths(self.scenario, path.parent, path.stem)
        comments, header = self.comments(), self.header()
        to_toml(scenario, comments=comments, header=header, folder=path.parent)  # refuses before any file
        written: list[Path] = []
        try:
            for j in scenario.jobs:
                f = self.types[j.name]
                if isinstance(j.service, dists.Empirical):
                    written.append(Path(j.service.path))
                    pd.DataFrame({"seconds": f.service.sample}).to_csv(written[-1], index=False)
                if isinstance(j.arrival, dists.TraceArrivals):
                    written.append(Path(j.arrival.path))
                    pd.DataFrame({"at": f.arrival.times}).to_csv(written[-1], index=False)
            write_toml(scenario, path, comments=comments, header=header, option=option)
        except OSError as e:
            _remove(written)
            raise UsageError(f"{option + ' ' if option else ''}{path}: cannot write "
                             f"({(e.strerror or str(e)).lower()})") from None
        except BaseException:
            _remove(written)
            raise
        return Scenario.from_toml(path)

    def plots(self, folder: str | Path, *, option: str | None = None) -> list[Path]:
        """One PNG per job type in ``folder`` (created if missing; its parent must exist):
        measured vs fitted service CDF, arrivals per minute."""
        return write_plots(self.types, make_out_dir(folder, option))

    # -- display --------------------------------------------------------------
    def table(self) -> pd.DataFrame:
        """One row per job type: jobs, arrival, service, KS, fail and poison rates."""
        rows = []
        for name, f in self.types.items():
            rows.append({"type": name, "queue": f.queue, "jobs": f.jobs, "arrival": _arrival_text(f.arrival),
                         "service": _service_text(f.service), "n": f.service.n,
                         "KS": None if math.isnan(f.service.ks) else round(f.service.ks, 4),
                         "KS p": None if math.isnan(f.service.ks_p) else round(f.service.ks_p, 3),
                         "fail_prob": round(f.failures.fail_prob, 4), "poison_prob": round(f.failures.poison_prob, 4),
                         "attempts": f.attempts, "priority": f.priority})
        return pd.DataFrame(rows)

    def _summary_line(self) -> str:
        start, end = self.window
        return (f"Calibration of {len(self.measured.jobs):,} jobs ({len(self.types)} types) from "
                f"{self.measured.source or 'measured jobs'}, {end - start:.6g} s window")

    def _pools_line(self) -> str:
        return "pools: " + "; ".join(f"{p.name} {p.workers} x {p.concurrency} ({', '.join(p.queues)})" for p in self.pools)

    def _measured_line(self) -> str:
        m = self.measured_summary()
        w, lat = m["wait"], m["latency"]
        return (f"measured: throughput {m['throughput']:.4g}/s, wait p50 {w['p50']:.4g} s p95 {w['p95']:.4g} s, "
                f"latency p50 {lat['p50']:.4g} s p95 {lat['p95']:.4g} s ({m['completed']} completed, {m['dead']} dead)")

    def _engine_line(self) -> str:
        o = self.overhead
        if o.by_load:
            rows = ", ".join(f"{u:.2g}: {sig(f * 1e3, ' ms')} + {sig(a * 1e3, ' ms')}" for u, f, a in o.by_load)
            return f"engine: overhead by load (utilization: fetch + ack) {rows} ({o.source})"
        pickup = f", pickup_latency {sig(o.pickup_latency * 1e3, ' ms')}" if o.pickup_latency else ""
        return (f"engine: fetch_overhead {sig(o.fetch_overhead * 1e3, ' ms')}, "
                f"ack_overhead {sig(o.ack_overhead * 1e3, ' ms')}{pickup} "
                f"({o.source}: {o.treatment})")

    def __repr__(self) -> str:
        lines = [self._summary_line()]
        table = self.table()
        if len(table):
            lines += ["  " + line for line in table.to_string(index=False).splitlines()]
        lines += [self._pools_line(), self._engine_line(), self._measured_line()]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def html_table(self) -> str:
        """:meth:`table` as HTML, in qsim's display style."""
        df = self.table()
        return table(list(df.columns), df.astype(object).itertuples(index=False, name=None))

    def _repr_html_(self) -> str:
        return page(para("", bold=self._summary_line()), self.html_table(),
                    para(self._engine_line()), para(self._measured_line()), para(self._pools_line()),
                    bullets(self.warnings))


def _remove(paths: list[Path]) -> None:
    for p in paths:
        p.unlink(missing_ok=True)


def with_paths(scenario: Scenario, folder: Path, stem: str) -> Scenario:
    """``scenario`` with its empirical and trace CSVs named ``<stem>.<type>.service.csv`` /
    ``.arrivals.csv`` in ``folder``."""
    jobs = []
    for j in scenario.jobs:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in j.name)
        svc, arr = j.service, j.arrival
        if isinstance(svc, dists.Empirical):
            svc = replace(svc, path=folder / f"{stem}.{safe}.service.csv")
        if isinstance(arr, dists.TraceArrivals):
            arr = replace(arr, path=folder / f"{stem}.{safe}.arrivals.csv")
        jobs.append(replace(j, service=svc, arrival=arr))
    return replace(scenario, jobs=tuple(jobs))
