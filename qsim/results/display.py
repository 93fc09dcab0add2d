"""How results read in Jupyter: escaped text, numbers and tables in one HTML style.

Every ``_repr_html_`` of qsim (model and engine results, the comparison, the
plan, the calibration report, the advice) is built from these few helpers, so
the figures look the same wherever they appear: a bold headline, a table with
the key figures first, then notes. :func:`summary_line` and
:func:`summary_html` render a Summary (model or engine alike).
"""

from __future__ import annotations

import html
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["escape", "num", "plain", "sig", "fixed", "para", "table", "bullets", "page", "summary_line", "summary_html"]


def escape(x: Any) -> str:
    """``x`` as text that is safe inside HTML (``<``, ``&`` and quotes escaped)."""
    return html.escape(str(x))


def num(x: Any, unit: str = "", digits: int = 3) -> str:
    """A number for a person: ``1,234`` (whole or large), ``0.0123`` (``digits`` significant), ``-`` when undefined."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return "-" if x is None else str(x)
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}{unit}"
    v = float(x)
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return ("inf" if v > 0 else "-inf") + unit
    if abs(v) >= 10 ** digits or v.is_integer():
        return f"{v:,.0f}{unit}"
    return f"{v:.{digits}g}{unit}"


def sig(x: float | None, unit: str = "", digits: int = 3) -> str:
    """A figure in a fixed width: ``digits`` significant digits (``1.23e+03``, ``0.0123``), ``-`` when undefined."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}{unit}"


def fixed(x: float | None, places: int | None = 3) -> str:
    """A time or figure to ``places`` decimals (whole numbers without them when ``places`` is None), ``-`` for None."""
    if x is None:
        return "-"
    return f"{x:.0f}" if places is None and float(x).is_integer() else f"{x:.{3 if places is None else places}f}"


def plain(x: float) -> str:
    """A number as a person wrote it, for messages about their input: ``3`` (not ``3.0``), ``0.25``."""
    return str(int(x)) if float(x).is_integer() else str(x)


def para(text: str, *, bold: str = "") -> str:
    """A paragraph of escaped ``text``, led by ``bold`` (escaped too) when given."""
    lead = f"<b>{escape(bold)}</b>" if bold else ""
    return f"<p>{lead}{' ' if lead and text else ''}{escape(text)}</p>"


def _cell(value: Any) -> str:
    return f"<td>{escape(value if isinstance(value, str) else num(value))}</td>"


def table(head: Sequence[str], rows: Iterable[Sequence[Any]], *, bold: Iterable[int] = ()) -> str:
    """An HTML table: ``head`` then one row per item of ``rows`` (row numbers in ``bold`` in bold).

    Cells that are numbers go through :func:`num`; text is escaped. The look is the notebook's own table style.
    """
    strong = set(bold)
    out = ["<table><thead><tr>"]
    out += [f"<th>{escape(h)}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for i, row in enumerate(rows):
        out.append('<tr style="font-weight:bold">' if i in strong else "<tr>")
        out += [_cell(value) for value in row]
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def bullets(items: Iterable[str]) -> str:
    """An escaped bullet list (empty string when there is nothing to list)."""
    lines = [f"<li>{escape(item)}</li>" for item in items]
    return f"<ul>{''.join(lines)}</ul>" if lines else ""


def page(*parts: str) -> str:
    """The parts (already HTML) one after another, in qsim's display block."""
    return '<div class="qsim-result">' + "\n".join(p for p in parts if p) + "</div>"


def _s(x: Any) -> str:
    return num(x, " s")


def summary_line(summary: Mapping[str, Any]) -> str:
    """One line of a Summary's key figures: throughput, p50/p95 wait and latency, then dead/lost/unfinished."""
    jobs, wait, lat = summary.get("jobs", {}), summary.get("wait", {}), summary.get("latency", {})
    line = (f"throughput {num(summary.get('throughput'))}/s, wait p50 {_s(wait.get('p50'))} p95 {_s(wait.get('p95'))}, "
            f"latency p50 {_s(lat.get('p50'))} p95 {_s(lat.get('p95'))}; {num(jobs.get('completed'))} completed")
    extra = [f"{num(jobs.get(k))} {k}" for k in ("dead", "lost", "unfinished") if jobs.get(k)]
    return line + "".join(f", {e}" for e in extra)


def summary_html(summary: Mapping[str, Any], *, title: str, notes: Sequence[str] = ()) -> str:
    """A Summary as a headline, one table (all jobs, then each job type) and a table of its queues."""
    jobs = summary.get("jobs", {})
    counts = ", ".join(f"{num(jobs.get(k))} {k}" for k in ("arrived", "completed", "dead", "unfinished", "lost",
                                                          "failed_attempts", "stalled") if k in jobs)
    u = summary.get("utilization")
    head = (f"throughput {num(summary.get('throughput'))}/s, utilization {num(u) if u is None else f'{u:.1%}'}; "
            f"jobs: {counts}")
    cols = ["", "completed", "dead", "wait p50 (s)", "wait p95 (s)", "wait p99 (s)", "latency p50 (s)",
            "latency p95 (s)", "latency p99 (s)"]

    def row(label: str, part: Mapping[str, Any]) -> list[Any]:
        w, lat = part.get("wait", {}), part.get("latency", {})
        return [label, part.get("completed"), part.get("dead"), w.get("p50"), w.get("p95"), w.get("p99"),
                lat.get("p50"), lat.get("p95"), lat.get("p99")]

    rows = [row("all jobs", {**summary, **{k: jobs.get(k) for k in ("completed", "dead")}})]
    rows += [row(f"type {name}", t) for name, t in summary.get("by_type", {}).items()]
    queues = [[name, q.get("completed"), q.get("dead"), q.get("max_depth"), q.get("wait", {}).get("p50"),
               q.get("wait", {}).get("p95")] for name, q in summary.get("by_queue", {}).items()]
    return page(para(head, bold=title + ":"), table(cols, rows, bold=[0]),
                table(["queue", "completed", "dead", "max depth", "wait p50 (s)", "wait p95 (s)"], queues)
                if queues else "", bullets(notes))
