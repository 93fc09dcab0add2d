"""Thresholds that gate a deploy: judge one measured Summary against SLOs (``locust ... --slo``).

The thresholds are the project's SLOs, parsed by the one SLO parser
(:func:`qsim.analysis.slo.language.parse_slo`: ``p95_wait<=2``, ``p95_latency[cut]<1.5``,
``dead<=3``, ``lost==0``); the measurement is a Summary (:func:`qsim.results.summary.summarize`
of the run's jobs). :func:`judge` asks each SLO itself whether the Summary
meets it (:meth:`SLO.met <qsim.analysis.slo.language.SLO.met>`) and what it measured
(:meth:`SLO.measure <qsim.analysis.slo.language.SLO.measure>`), so a form the parser
learns (per-window SLOs over the Summary's ``windows``) is judged here
without a change.

A threshold passes when its metric is defined and meets the comparison; a
metric without data (no job completed, so no latency) fails, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qsim.analysis.slo.language import SLO
from qsim.results.display import sig

__all__ = ["ThresholdVerdict", "judge", "verdict_document", "format_verdicts"]


@dataclass(frozen=True)
class ThresholdVerdict:
    """One row of the verdict table: the threshold, what was measured, pass or fail."""

    threshold: str
    measured: float | None
    passed: bool
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The row as JSON."""
        return {"threshold": self.threshold, "measured": self.measured,
                "verdict": "pass" if self.passed else "fail", "note": self.note}


def judge(summary: Mapping[str, Any], slos: Sequence[SLO], *, notes: Mapping[str, str] | None = None) -> list[ThresholdVerdict]:
    """The verdict of every SLO on one Summary (``notes``: a remark per threshold, e.g. why it was cut short)."""
    rows = []
    for slo in slos:
        text = str(slo)
        try:
            value = slo.measure(summary)
        except (KeyError, TypeError):  # a per-type metric of a type that had no job
            value = None
        passed = value is not None and bool(slo.met(summary))
        note = (notes or {}).get(text, "") or ("" if value is not None else "no data")
        rows.append(ThresholdVerdict(text, value, passed, note))
    return rows


def verdict_document(rows: Sequence[ThresholdVerdict]) -> dict[str, Any]:
    """``{"passed": bool, "failed": [threshold, ...], "thresholds": [row, ...]}``."""
    failed = [r.threshold for r in rows if not r.passed]
    return {"passed": not failed, "failed": failed, "thresholds": [r.as_dict() for r in rows]}


def format_verdicts(rows: Sequence[ThresholdVerdict], *, title: str = "") -> str:
    """The verdict table and a last line: ``thresholds passed: 2 of 2`` or which failed."""
    width = max([len("threshold"), *(len(r.threshold) for r in rows)]) + 2
    lines = [title] if title else []
    lines.append(f"{'threshold':<{width}}{'measured':>12}  verdict")
    for r in rows:
        lines.append(f"{r.threshold:<{width}}{sig(r.measured, digits=4):>12}  {'pass' if r.passed else 'FAIL'}"
                     + (f"  ({r.note})" if r.note else ""))
    failed = [r.threshold for r in rows if not r.passed]
    lines.append(f"thresholds passed: {len(rows)} of {len(rows)}" if not failed
                 else f"thresholds FAILED: {len(failed)} of {len(rows)} missed: {', '.join(failed)}")
    return "\n".join(lines)
