"""Tables a person reads (Summary, closed forms, model vs engine) and the files ``--out`` writes."""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from qsim.cli.common import finite, fmt
from qsim.results.outpath import make_out_dir
from qsim.results.records import Records
from qsim.spec.scenario import Scenario

__all__ = ["format_summary", "format_theory", "format_comparison", "format_check", "write_outputs"]


def format_summary(summary: Mapping[str, Any]) -> str:
    """A readable table of a Summary."""
    jobs = summary["jobs"]
    lines = [
        f"scenario {summary['scenario']}  source {summary['source']}  seed {summary['seed']}",
        "jobs     " + "  ".join(f"{k} {v}" for k, v in jobs.items()),
        f"throughput {fmt(summary['throughput'])} jobs/s   utilization {fmt(summary['utilization'])}",
        "",
        f"{'':<24}{'mean':>10}{'p50':>10}{'p95':>10}{'p99':>10}{'max':>10}",
    ]

    def row(label: str, s: dict[str, Any]) -> str:
        return f"{label:<24}" + "".join(f"{fmt(s.get(k)):>10}" for k in ("mean", "p50", "p95", "p99", "max"))

    lines.append(row("wait (s)", summary["wait"]))
    lines.append(row("latency (s)", summary["latency"]))
    for name, t in summary["by_type"].items():
        lines.append(row(f"  {name} wait", t["wait"]))
        lines.append(row(f"  {name} latency", t["latency"]))
    lines.append("")
    lines.append(f"{'queue':<24}{'completed':>10}{'dead':>10}{'max_depth':>10}{'p95 wait':>10}")
    for name, q in summary["by_queue"].items():
        lines.append(f"{name:<24}{q['completed']:>10}{q['dead']:>10}{q['max_depth']:>10}{fmt(q['wait']['p95']):>10}")
    scaled = summary.get("autoscaling") or {}
    if scaled:
        lines.append("")
        lines.append(f"{'autoscaler':<24}{'policy':>16}{'workers':>14}{'worker-h':>10}{'events':>8}{'flaps':>7}"
                     f"{'cut jobs':>9}")
        for pool, a in scaled.items():
            w = a["workers"]
            span = f"{w['min']}/{fmt(w['mean'])}/{w['max']}"
            lines.append(f"{pool:<24}{a.get('policy', ''):>16}{span:>14}{fmt(a['worker_seconds'] / 3600):>10}"
                         f"{a['scale_events']:>8}{a['flaps']:>7}{a['cut_jobs']:>9}")
        lines.append("(workers: min/mean/max asked for; worker-h: processes' hours, cold starts and drains included)")
    return "\n".join(lines)


def format_theory(result: dict[str, Any]) -> str:
    """A readable table of a closed-form prediction."""
    lines = [
        f"scenario {result['scenario']}  model {result['model']}",
        f"c {result['c']}  lambda {fmt(result['lambda'])}/s  mean service {fmt(result['mean_service'])} s  "
        f"rho {fmt(result['rho'])}  P(wait) {fmt(result.get('p_wait'))}",
        "wait (s)    " + "  ".join(f"{k} {fmt(v)}" for k, v in result["wait"].items()),
        "latency (s) " + "  ".join(f"{k} {fmt(v)}" for k, v in result["latency"].items() if v is not None),
    ]
    for name, t in result.get("by_type", {}).items():
        lines.append(f"  {name}: wait mean {fmt(t['wait']['mean'])} s")
    lines += [f"note: {n}" for n in result.get("notes", [])]
    return "\n".join(lines)


def format_comparison(doc: dict[str, Any]) -> str:
    """Model, engine and engine/model for each compared field."""
    from qsim.analysis.fidelity.compare import field_value

    side = str(doc["engine"].get("source") or "engine")  # "engine", or "bullmq" with --target bullmq
    lines = [f"scenario {doc['model']['scenario']}  seed {doc['model']['seed']}",
             f"{'':<22}{'model':>12}{side:>12}{side + '/model':>14}"]
    for path, ratio in doc["ratios"].items():
        m, e = field_value(doc["model"], path), field_value(doc["engine"], path)
        cells = [f"{v:.4g}" if isinstance(v, float) else "-" if v is None else str(v) for v in (m, e)]
        lines.append(f"{path:<22}{cells[0]:>12}{cells[1]:>12}{'-' if ratio is None else f'{ratio:.3f}':>14}")
    jobs = doc["engine"]["jobs"]
    lost, unfinished = jobs["lost"], jobs.get("unfinished", 0)
    lines.append(f"\n{side} lost {lost} job(s)" if lost else f"\n{side} lost no job")
    if unfinished:
        idle = side == "bullmq" and not jobs.get("completed") and not jobs.get("dead")
        hint = ": no BullMQ worker took any (is one listening on the queue?)" if idle else ""
        lines.append(f"{side} left {unfinished} of {jobs.get('arrived', '?')} job(s) unfinished at the drain "
                     f"timeout{hint}")
    for note in doc.get("bullmq", {}).get("notes", []):
        lines.append(f"note: {note}")
    if doc.get("paused"):
        from qsim.analysis.fidelity.compare import paused_note

        lines.append(f"note: {paused_note(doc['paused'], side)}")
    return "\n".join(lines)


def _slo_value(x: Any, share: float | None) -> str:
    """An SLO's per-run value: a figure, or the share of windows meeting it."""
    return fmt(x) if not share or x is None else f"{100 * x:.3g}% of windows"


def format_check(doc: Mapping[str, Any], side: str = "engine") -> str:
    """The verdict table of ``qsim compare --check`` (its ``check`` document) and a last line saying which
    failed; ``side`` names the measured column (``engine``, ``bullmq``)."""
    from qsim.analysis.fidelity.check import Tolerance, unit_of

    tols = ["-" if q["verdict"] == "skip" else
            Tolerance(q["rel"], q["abs"], share=q.get("share", 1.0),
                      band=q.get("band_replications", 0)).describe(unit_of(q["quantity"]))
            for q in doc["quantities"]]
    width = max([16, *(len(t) + 2 for t in tols)])
    lines = [f"{'quantity':<24}{'model':>11}{side:>11}{'ratio':>8}  {'tolerance':<{width}}verdict"]
    for q, tol_text in zip(doc["quantities"], tols):
        ratio = "-" if q["ratio"] is None else f"{q['ratio']:.3f}"
        note = f"  {q['note']}" if q["note"] else ""
        lines.append(f"{q['quantity']:<24}{fmt(q['model']):>11}{fmt(q['engine']):>11}{ratio:>8}  "
                     f"{tol_text:<{width}}{q['verdict']:<8}{note}".rstrip())
    for slo in doc.get("slo", []):
        m, e = (_slo_value(slo[k], slo.get("share")) for k in ("model", "engine"))
        lines.append(f"slo {slo['slo']}: model {m} ({'met' if slo['model_met'] else 'missed'}), "
                     f"{side} {e} ({'met' if slo['engine_met'] else 'MISSED'})")
    checked = [q for q in doc["quantities"] if q["verdict"] != "skip"]
    if doc["passed"]:
        lines.append(f"\ncheck passed: {len(checked)} of {len(checked)} quantities within tolerance")
    else:
        lines.append(f"\ncheck FAILED: {len(doc['failed'])} of {len(checked)} out of tolerance: "
                     + ", ".join(doc["failed"]))
    return "\n".join(lines)


def write_outputs(out: Path, jobs: Any, timeseries: Any, summary: Mapping[str, Any], scenario: Scenario,
                  records: Records | None = None, *, option: str = "--out") -> None:
    """jobs.csv, attempts.csv, drains.csv (when processes were stopped), timeseries.csv,
    summary.json and the PNG plots into ``out`` (created if missing, one level: its parent
    must exist, see :mod:`qsim.results.outpath`)."""
    from qsim.analysis import plots

    out = make_out_dir(out, option)
    jobs.to_csv(out / "jobs.csv", index=False)
    if records is not None:
        records.attempts.to_csv(out / "attempts.csv", index=False)
        drains = records.extra.get("drains")
        if drains is not None and len(drains):
            drains.to_csv(out / "drains.csv", index=False)
    timeseries.to_csv(out / "timeseries.csv", index=False)
    (out / "summary.json").write_text(json.dumps(finite(summary), indent=2, allow_nan=False) + "\n")
    plots.queue_depth(timeseries, title=f"{scenario.name}: queue depth").savefig(out / "queue_depth.png", dpi=100)
    plots.wait_distribution(jobs, warmup=scenario.warmup, title=f"{scenario.name}: wait time").savefig(
        out / "wait_distribution.png", dpi=100)
    for pool in summary.get("autoscaling") or {}:
        from qsim.analysis.autoscaling.plots import autoscaling_plot

        autoscaling_plot({f"{pool} ({summary['autoscaling'][pool].get('policy', '')})": summary}, pool,
                         title=f"{scenario.name}: workers and p95 wait").savefig(out / f"autoscaling_{pool}.png",
                                                                                 dpi=100)
