"""The advice: how many workers a running queue needs, the figures behind it, and how it reads.

:class:`Advice` is what :func:`qsim.advise.advise` returns: a short ``repr``
in a terminal, a table in Jupyter (``_repr_html_``), :meth:`Advice.as_json`
for ``qsim advise --json`` and :meth:`Advice.write` for the planned scenario.
:class:`Unavailable` stands in for an advice that could not be made this time
(``--watch``: no jobs in the window, Redis away), and :func:`changes` lists
the key figures that moved between two of them (what ``--watch`` prints).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qsim.advise.capacity import Shutdown
from qsim.analysis.plan.report import PlanResult
from qsim.calibrate.report import Calibration
from qsim.errors import CalibrationError
from qsim.results.display import bullets, page, para, sig
from qsim.spec.redis_cost import describe
from qsim.spec.scenario import Scenario

__all__ = ["Advice", "Unavailable", "NoJobsInWindow", "changes", "stamp", "RATE_CHANGE", "UTILIZATION_CHANGE"]

#: ``--watch`` reports a change of the arrival rate or the mean service time of at least this fraction.
RATE_CHANGE = 0.10
#: ``--watch`` reports a change of utilization of at least this much (absolute).
UTILIZATION_CHANGE = 0.05


class NoJobsInWindow(CalibrationError):
    """Raised when a queue's window holds no jobs, or too few to calibrate from."""


def stamp(t: float) -> str:
    """``2024-05-01T12:00:03Z`` for Unix time ``t``."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Advice:
    """How many workers the pool of ``queues`` needs to meet ``slos``, and why.

    Attributes:
        recommended_workers: The least count meeting every SLO with confidence (None: none can; see ``reason``).
        concurrency: Jobs per worker the plan assumed (observed, unless given).
        reason: Why no count can meet the SLOs (None when one does).
        current_workers: Workers seen running at once in the window.  observed_concurrency: Jobs one ran at once.
        arrival_rate: Jobs per second enqueued in the window.  offered_load: Busy slots they need.
        utilization: Measured busy share of ``current_workers x concurrency`` slots.
        measured: What the window's jobs show (waits, latency, throughput).
        predicted: At the recommendation: the model's mean run (waits, utilization) and intervals.
        search: The worker range searched and the plan's budget.  shutdown: Drain and termination grace.
        at: The window's end (Redis clock).  seconds, cpu_seconds: What computing the advice took.
        scenario: The planned scenario (the pool at ``concurrency``).  calibration: The fits.  plan: The plan.
        redis: At the recommendation: the Redis load it implies, as ``qsim plan``'s ``"redis"`` (None: no
            recommendation).
    """

    queues: tuple[str, ...]
    slos: tuple[str, ...]
    recommended_workers: int | None
    concurrency: int
    reason: str | None
    current_workers: int
    observed_concurrency: int
    pool: str
    arrival_rate: float
    offered_load: float
    utilization: float
    measured: dict[str, Any]
    predicted: dict[str, Any] | None
    search: dict[str, Any]
    shutdown: Shutdown
    at: float
    seconds: float
    cpu_seconds: float
    scenario: Scenario = field(repr=False)
    calibration: Calibration = field(repr=False)
    plan: PlanResult | None = field(default=None, repr=False)
    window: str | None = None
    warnings: tuple[str, ...] = ()
    redis: dict[str, Any] | None = None

    @property
    def queue(self) -> str:
        """The queues, comma-joined (the ``queue`` label of the metrics)."""
        return ",".join(self.queues)

    @property
    def service_mean(self) -> float:
        """Mean service time per job, weighted by the types' arrival rates (s)."""
        fits = [f for f in self.calibration.types.values() if f.queue in self.queues]
        rate = sum(f.arrival.rate for f in fits)
        return sum(f.arrival.rate * f.service.mean for f in fits) / rate if rate > 0 else math.nan

    def service_text(self) -> str:
        """``lognormal mean 0.2 s cv 0.6`` for one job type, else the weighted mean over the types."""
        fits = [f for f in self.calibration.types.values() if f.queue in self.queues]
        if len(fits) == 1:
            s = fits[0].service
            cv = f" cv {s.cv:.2g}" if s.kind not in ("exponential", "constant") else ""
            return f"{s.kind} mean {s.mean:.3g} s{cv}"
        return f"mean {self.service_mean:.3g} s over {len(fits)} job types"

    def predicted_wait(self, quantile: str = "p95") -> float | None:
        """The model's wait quantile (``p50``, ``p95``, ``p99``, ``mean``) at the recommendation."""
        if self.predicted is None:
            return None
        value = self.predicted["wait"].get(quantile)
        return None if value is None else float(value)

    # -- documents ------------------------------------------------------------
    def plan_command(self, path: str = "advised.toml") -> str:
        """The ``qsim plan`` command that reproduces the recommendation from :meth:`write`'s TOML."""
        s = self.search
        lo, hi = s["workers"]
        slos = " ".join(f'--slo "{x}"' for x in self.slos)
        return (f"qsim plan {path} {slos} --vary {s['path']}={lo}:{hi} --replications {s['replications']} "
                f"--confidence {s['confidence']:g} --search {s['method']} --seed {s['seed']}")

    def write(self, path: str | Path, *, option: str | None = None) -> Scenario:
        """Write the planned scenario as a commented TOML (empirical CSVs beside it); returns it as written.
        The folder must exist (see :meth:`qsim.calibrate.Calibration.write`)."""
        fields = {f.name: getattr(self.calibration, f.name) for f in dataclasses.fields(self.calibration)}
        return _Planned(**{**fields, "scenario": self.scenario}).write(path, option=option)

    def light(self) -> Advice:
        """This advice without the measured job rows (what travels between processes and stays in memory)."""
        m = self.calibration.measured
        slim = dataclasses.replace(m, jobs=m.jobs.iloc[:0], attempts=m.attempts.iloc[:0])
        return dataclasses.replace(self, calibration=dataclasses.replace(self.calibration, measured=slim))

    def as_json(self, toml: str = "advised.toml") -> dict[str, Any]:
        """The ``qsim advise --json`` document (``plan_command`` names ``toml`` as the scenario file)."""
        cal = self.calibration
        start, end = cal.window
        return {
            "recommended_workers": self.recommended_workers, "concurrency": self.concurrency, "reason": self.reason,
            "queue": self.queue, "queues": list(self.queues), "slo": list(self.slos), "pool": self.pool,
            "current_workers": self.current_workers, "observed_concurrency": self.observed_concurrency,
            "arrival_rate": self.arrival_rate, "service_mean": self.service_mean, "offered_load": self.offered_load,
            "utilization": self.utilization,
            "service": {n: {"kind": f.service.kind, "mean": f.service.mean, "cv": f.service.cv, "n": f.service.n,
                            "ks": f.service.ks, "arrival": f.arrival.as_dict()["arrival"], "jobs": f.jobs,
                            "queue": f.queue}
                        for n, f in cal.types.items()},
            "window": {"spec": self.window, "start": start, "end": end, "seconds": end - start,
                       "jobs": self.measured.get("jobs")},
            "measured": self.measured, "predicted": self.predicted, "search": self.search,
            "plan_command": self.plan_command(toml), "shutdown": self.shutdown.as_dict(),
            "overhead": cal.overhead.as_dict(), "source": cal.measured.source, "at": self.at,
            "seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "warnings": list(self.warnings),
            "redis": self.redis,
            "scenario": self.scenario.to_dict(),
        }

    # -- display --------------------------------------------------------------
    def headline(self) -> str:
        """``queue 'orders' needs 5 workers x 4 for p95_wait<=2 (now 3)`` or why no count can."""
        slo = " and ".join(self.slos)
        who = f"queue{'s' if len(self.queues) > 1 else ''} {', '.join(map(repr, self.queues))}"
        if self.recommended_workers is None:
            if (self.reason or "").startswith("no worker count"):
                return f"{who}: {self.reason}"
            return f"{who}: no worker count can meet {slo}: {self.reason}"
        return (f"{who} needs {self.recommended_workers} worker{'s' if self.recommended_workers != 1 else ''} "
                f"x {self.concurrency} for {slo} (now {self.current_workers})")

    def _measured_line(self) -> str:
        w = self.measured.get("wait", {})
        start, end = self.calibration.window
        where = f"in the last {self.window} " if self.window else ""
        return (f"measured {where}({self.measured.get('jobs', 0):,} jobs over {end - start:.4g} s): arrival "
                f"{self.arrival_rate:.4g}/s, "
                f"service {self.service_text()}, load {self.offered_load:.3g} busy slots, utilization "
                f"{sig(self.utilization)} on {self.current_workers} x {self.concurrency}, wait p95 {sig(w.get('p95'), ' s')}")

    def _predicted_line(self) -> str:
        s = self.search
        how = (f"{s['runs']} runs, {s['points_simulated']} points of workers {s['workers'][0]}..{s['workers'][1]}, "
               f"{s['confidence']:.0%} intervals")
        if self.predicted is None:
            return f"searched: {how}" if s["runs"] else "not simulated: no worker count can keep up"
        p = self.predicted
        ci = (p.get("metrics", {}).get("p95_wait") or {}).get("ci")
        band = f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else ""
        return (f"predicted at {self.recommended_workers}: wait p50 {sig(p['wait'].get('p50'), ' s')} "
                f"p95 {sig(p['wait'].get('p95'), ' s')}{band} p99 {sig(p['wait'].get('p99'), ' s')}, utilization "
                f"{sig(p.get('utilization'))} ({how})")

    def line(self) -> str:
        """One line of the key figures (what ``--watch`` prints)."""
        rec = "none" if self.recommended_workers is None else f"{self.recommended_workers} x {self.concurrency}"
        p95 = self.predicted_wait("p95")
        pred = f", predicted p95 wait {p95:.3g} s" if p95 is not None else ""
        return (f"{self.queue}: recommended {rec} for {' and '.join(self.slos)}{pred}; arrival "
                f"{self.arrival_rate:.4g}/s, service {self.service_mean:.3g} s, utilization {sig(self.utilization)} "
                f"on {self.current_workers} workers" + (f"; {self.reason}" if self.reason else ""))

    def __repr__(self) -> str:
        lines = [self.headline(), "  " + self._measured_line(), "  " + self._predicted_line()]
        if self.redis is not None:
            lines.append("  " + describe(self.redis))
        lines.append(f"  shutdown: {self.shutdown}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        redis = para(describe(self.redis).removeprefix("redis: "), bold="Redis:") if self.redis else ""
        return page(para("", bold=self.headline()), para(self._measured_line()), para(self._predicted_line()), redis,
                    para(str(self.shutdown), bold="shutdown:"), self.calibration.html_table(), bullets(self.warnings))


class _Planned(Calibration):
    """A calibration whose TOML carries the planned scenario and says how its run length was chosen."""

    def comments(self) -> dict[str, str]:
        c = super().comments()
        c["duration"] = (f"long enough for the planned jobs per run; the measured window was "
                         f"{self.window[1] - self.window[0]:.6g} s")
        c["warmup"] = "a tenth of the run, left out of the statistics"
        c["seed"] = "replication r of the plan uses seed + r"
        return c

    def header(self) -> str:
        return super().header().replace("Calibrated by `qsim calibrate`", "Planned by `qsim advise`, calibrated")


@dataclass(frozen=True)
class Unavailable:
    """No advice this time (``--watch`` and the worker's advisor carry on): the reason, and when."""

    queues: tuple[str, ...]
    reason: str
    at: float

    @property
    def queue(self) -> str:
        return ",".join(self.queues)

    def as_json(self) -> dict[str, Any]:
        """``{"recommended_workers": null, "concurrency": null, "reason": ..., ...}``."""
        return {"recommended_workers": None, "concurrency": None, "reason": self.reason, "queue": self.queue,
                "queues": list(self.queues), "available": False, "at": self.at}

    def line(self) -> str:
        return f"{self.queue}: no advice: {self.reason}"

    def __repr__(self) -> str:
        return f"Unavailable({self.line()!r})"


def _moved(old: float, new: float, share: float) -> bool:
    if math.isnan(old) or math.isnan(new):
        return math.isnan(old) != math.isnan(new)
    return abs(new - old) > share * max(abs(old), 1e-12)


def changes(before: Advice | Unavailable | None, after: Advice | Unavailable) -> list[str]:
    """The key figures that changed from ``before`` to ``after`` (empty: nothing worth a line).

    Key figures: the recommendation (or why there is none), the current worker
    count and concurrency, the arrival rate and mean service time (by
    :data:`RATE_CHANGE` or more) and the utilization (by :data:`UTILIZATION_CHANGE`).
    """
    if before is None:
        return ["first"]
    if isinstance(after, Unavailable) or isinstance(before, Unavailable):
        if isinstance(after, Unavailable) and isinstance(before, Unavailable):
            return [] if after.reason == before.reason else ["no advice"]
        return ["no advice"] if isinstance(after, Unavailable) else ["advice again"]
    out = []
    if (before.recommended_workers, before.concurrency) != (after.recommended_workers, after.concurrency):
        out.append(f"recommended {before.recommended_workers} -> {after.recommended_workers}"
                   + (f" (concurrency {before.concurrency} -> {after.concurrency})"
                      if before.concurrency != after.concurrency else ""))
    elif after.recommended_workers is None and before.reason != after.reason:
        out.append("reason")
    if before.current_workers != after.current_workers:
        out.append(f"workers {before.current_workers} -> {after.current_workers}")
    if _moved(before.arrival_rate, after.arrival_rate, RATE_CHANGE):
        out.append(f"arrival {before.arrival_rate:.4g}/s -> {after.arrival_rate:.4g}/s")
    if _moved(before.service_mean, after.service_mean, RATE_CHANGE):
        out.append(f"service {before.service_mean:.3g} s -> {after.service_mean:.3g} s")
    u0, u1 = before.utilization, after.utilization
    if not (math.isnan(u0) and math.isnan(u1)) and (math.isnan(u0) or math.isnan(u1) or
                                                    abs(u1 - u0) >= UTILIZATION_CHANGE):
        out.append(f"utilization {sig(u0)} -> {sig(u1)}")
    return out
