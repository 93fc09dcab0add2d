"""The result of a plan, and how a person reads it: a text table, a compact repr, an HTML table.

:class:`PlanResult` is a plain ``dict`` (the JSON that ``qsim plan --json``
prints, see :func:`qsim.analysis.plan.planner.plan`) with three ways to show it:
:meth:`~PlanResult.table` (the terminal table of ``qsim plan``), ``repr`` (one
line: the answer first) and ``_repr_html_`` (Jupyter: the answer, then one
row per point with ``p95_wait 1.42 ± 0.08`` style figures).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qsim.analysis.plan.runlength import MIN_TAIL_JOBS
from qsim.analysis.slo.windowed import WindowMetric, parse_windowed, split_scope
from qsim.results.display import bullets, page, para, table
from qsim.spec.redis_cost import describe

__all__ = ["PlanResult", "figure"]


def figure(metric: Mapping[str, Any] | None) -> str:
    """``1.42 ± 0.08`` (or ``1.42`` without an interval, ``-`` when undefined)."""
    if not metric or metric.get("mean") is None:
        return "-"
    mean, half = metric["mean"], metric.get("half_width")
    return f"{mean:.3g}" if half is None else f"{mean:.3g} ± {half:.2g}"


def _metric_key(slo: str) -> str:
    """The key of an SLO's per-run value in a point's ``metrics``: ``p95_wait``, ``share_of_windows(p95_wait<=2)``."""
    body, scope, _ = split_scope(slo)
    if scope == "run":
        return body.split("<", 1)[0].split(">", 1)[0].strip()
    metric, op, value = parse_windowed(body, slo)
    return WindowMetric(metric, op, value, scope).key


def _params(params: Mapping[str, Any] | None) -> str:
    if params is None:
        return "none"
    return ", ".join(f"{k} = {v}" for k, v in params.items())


class PlanResult(dict[str, Any]):
    """A plan's result: the JSON document as a dict, shown compactly in a REPL and as a table in Jupyter."""

    def shown_metrics(self) -> list[str]:
        """The metric columns of the tables: each SLO's metric, then p95 wait and utilization."""
        keys = [_metric_key(s) for s in self.get("slo", [])]
        return list(dict.fromkeys(keys + ["p95_wait", "utilization"]))

    def _cells(self, point: Mapping[str, Any]) -> list[str]:
        if point.get("run_length", {}).get("unstable"):
            return ["unstable"] * len(self.shown_metrics())
        short = point.get("run_length", {}).get("short", {})
        cells = []
        for key in self.shown_metrics():
            text = figure(point.get("metrics", {}).get(key))
            cells.append(text + ("?" if key in short else ""))
        return cells

    def _verdict(self, point: Mapping[str, Any]) -> str:
        if point.get("run_length", {}).get("unstable"):
            return "no (unstable)"
        if point.get("meets_slo"):
            return "yes"
        return "no (undecided)" if "undecided" in point.get("checks", {}).values() else "no"

    def _headers(self) -> list[str]:
        """Column names of the varied paths: the last part when that is unambiguous."""
        paths = list(self.get("vary", {}))
        short = [p.rsplit(".", 1)[-1] for p in paths]
        return [s if short.count(s) == 1 else p for p, s in zip(paths, short)]

    def notes(self) -> list[str]:
        """The run-length warnings, grouped: unstable points, then short quantiles."""
        paths = list(self.get("vary", {}))
        unstable = [p for p in self["points"] if p.get("run_length", {}).get("unstable")]
        lines = []
        if unstable:
            where = ", ".join("(" + ", ".join(str(p["params"][k]) for k in paths) + ")" for p in unstable[:8])
            more = f" and {len(unstable) - 8} more" if len(unstable) > 8 else ""
            lines.append(f"unstable at {where}{more}: the queue still grows at the end of the run (the later jobs "
                         "wait longer and longer), so those figures depend on the run's "
                         "length; overloaded, or lengthen the run")
        slo_keys = set(self.shown_metrics())
        short: dict[str, int] = {}
        for p in self["points"]:
            for key in p.get("run_length", {}).get("short", {}):
                if key in slo_keys:
                    short[key] = short.get(key, 0) + 1
        for key, count in short.items():
            lines.append(f"? {key}: fewer than {MIN_TAIL_JOBS} jobs beyond that quantile in a run at {count} "
                         "point(s): the figure is mostly luck; lengthen the run")
        return lines

    def table(self) -> str:
        """The terminal table of ``qsim plan``: one row per simulated point, then the recommendation."""
        paths = list(self.get("vary", {}))
        metrics = self.shown_metrics()
        has_cost = self.get("minimize") is not None
        profiled = bool(self.get("profile"))
        head = self._headers() + metrics + (["cost"] if has_cost else []) + ["runs", "meets"] + \
            (["peak"] if profiled else [])
        rows = []
        for p in self["points"]:
            row = [str(p["params"][k]) for k in paths] + self._cells(p)
            if has_cost:
                row.append(f"{p['cost']:.4g}")
            row += [str(p.get("replications", 1)), self._verdict(p)]
            if profiled:
                row.append("yes" if p.get("meets_peak") else "no")
            rows.append(row)
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
        lines = [f"SLO {' and '.join(self.get('slo', []))}" + self._how()]
        lines.append("  ".join(h.rjust(w) for h, w in zip(head, widths)))
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
        lines += self.notes()
        lines.append("recommended: " + (_params(self["recommended"]) if self["recommended"] is not None
                                        else "none of these values meets the SLO"))
        for i, params in enumerate(self.get("next", []), start=2):
            lines.append(f"{'next' if i == 2 else '    '} ({i}): {_params(params)}")
        lines += self.profile_lines()
        lines += self.redis_lines()
        return "\n".join(lines)

    def redis_lines(self) -> list[str]:
        """The recommended point's Redis load (``qsim plan`` prints the warnings on stderr)."""
        r = self.get("redis")
        return [describe(r)] if r else []

    def profile_lines(self) -> list[str]:
        """Over a rate profile: the peak hour, its answer, and what static sizings cost over the profile."""
        prof = self.get("profile")
        if not prof:
            return []
        peak = prof["peak"]
        lines = [f"peak: [{peak['start']:g}, {peak['end']:g}) s, {peak['rate']:.4g} jobs/s expected "
                 f"(the run's mean {peak['mean_rate']:.4g}); judged on its windows alone "
                 f"({' and '.join(peak['slo'])}): "
                 + (_params(peak["recommended"]) if peak["recommended"] is not None else "none of these values")]

        def cost(what: str, c: Mapping[str, Any] | None) -> None:
            if c is not None:
                workers = ", ".join(f"{n} {pool}" for pool, n in c["workers"].items())
                lines.append(f"{what} held over the profile ({c['span'][1] - c['span'][0]:g} s): "
                             f"{c['worker_hours']:.4g} worker-hours (workers: {workers})")

        cost("static sizing for the peak", prof.get("static_peak"))
        cost("static sizing recommended", prof.get("static_recommended"))
        return lines

    def _how(self) -> str:
        search = self.get("search", {})
        reps = self.get("replications", 1)
        how = [f"{reps} replications" if reps != 1 else "1 replication",
               f"{self.get('confidence', 0.95):.0%} intervals" if reps != 1 else ""]
        if search.get("method") == "bisection":
            how.append(f"bisection along {search['axis']}: {search['points_simulated']} of "
                       f"{search['grid_points']} points simulated")
        if self.get("minimize"):
            how.append(f"cost {self['minimize']}")
        return "  (" + ", ".join(h for h in how if h) + ")"

    def __repr__(self) -> str:
        search = self.get("search", {})
        return (f"PlanResult(recommended={self.get('recommended')!r}, slo={self.get('slo')!r}, "
                f"points={len(self.get('points', []))}/{search.get('grid_points', len(self.get('points', [])))}, "
                f"replications={self.get('replications', 1)!r}, runs={search.get('runs', '?')})")

    def _repr_html_(self) -> str:
        paths = list(self.get("vary", {}))
        best = self.get("recommended")
        lead = para(f"{_params(best)} · SLO: {' and '.join(self.get('slo', []))}{self._how()}", bold="Recommended:")
        nxt = para("; ".join(_params(p) for p in self["next"]), bold="Next:") if self.get("next") else ""
        head = ["meets"] + self._headers() + self.shown_metrics() + (["cost"] if self.get("minimize") else []) \
            + ["runs"]
        rows, chosen = [], []
        for i, p in enumerate(self["points"]):
            star = " ★" if best is not None and p["params"] == best else ""
            cells: list[object] = [self._verdict(p) + star, *(p["params"][k] for k in paths), *self._cells(p)]
            if self.get("minimize"):
                cells.append(f"{p['cost']:.4g}")
            rows.append(cells + [p.get("replications", 1)])
            chosen += [i] if star else []
        redis = para(describe(self["redis"]).removeprefix("redis: "), bold="Redis:") if self.get("redis") else ""
        return page(lead, nxt, redis, table(head, rows, bold=chosen), bullets(self.notes() + self.get("warnings", [])))
