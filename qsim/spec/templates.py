"""Payload templates: the data a job type's real handlers receive in a load test (``jobs[].payload``).

A template is a table of JSON values whose strings may name the job they are
rendered for::

    payload = { order_id = "{job_id}", seq = "{n}", items = 3, note = "load test {run_id}" }

=============  ==========================================================
placeholder    value
=============  ==========================================================
``{job_id}``   the job's id (``lt-1a2b3c4d-checkout-17``)
``{n}``        the job's number within its type in this run (0, 1, ...)
``{type}``     the job type (the job's name)
``{queue}``    the job type's queue
``{run_id}``   the load test's run id
=============  ==========================================================

A string that is exactly one placeholder becomes its value with its own type
(``"{n}"`` renders as the number 17); a placeholder inside a longer string is
replaced by its text. ``{{`` and ``}}`` are literal braces. Any other
``{name}`` is an error when the scenario is read, naming the key.

``jobs[].data`` is different: fixed fields merged into the *planned* payload
(``{"s": [...], "x": [...]}``) that the synthetic handlers execute (qsim's
``pool_worker`` and the test suite's BullMQ worker). A ``payload`` replaces
that planned payload where real handlers run: the Locust load test (either
target, unless ``--start-workers`` starts synthetic workers) and
``qsim compare --target bullmq``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["PLACEHOLDERS", "template_errors", "render"]

#: The names a template may use, in the order the docs list them.
PLACEHOLDERS = ("job_id", "n", "type", "queue", "run_id")
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def _scan(text: str) -> list[str]:
    """The problems of one template string (empty when it is fine)."""
    bad = []
    for m in _FIELD.finditer(text):
        token = m.group(0)
        if token in ("{{", "}}"):
            continue
        if token in ("{", "}"):
            bad.append(f"has an unmatched {token!r} (write {token * 2} for a literal brace)")
        elif m.group(1) not in PLACEHOLDERS:
            bad.append(f"names an unknown placeholder {token} (known: "
                       + ", ".join("{" + p + "}" for p in PLACEHOLDERS) + ")")
    return bad


def template_errors(template: Any, key: str = "payload") -> list[tuple[str, str]]:
    """``(key, problem)`` for every bad placeholder in ``template`` (nested keys spelled out)."""
    out: list[tuple[str, str]] = []
    if isinstance(template, Mapping):
        for k, v in template.items():
            out += template_errors(v, f"{key}.{k}")
    elif isinstance(template, (list, tuple)):
        for i, v in enumerate(template):
            out += template_errors(v, f"{key}[{i}]")
    elif isinstance(template, str):
        out += [(key, problem) for problem in _scan(template)]
    return out


def _text(text: str, values: Mapping[str, Any]) -> Any:
    whole = _FIELD.fullmatch(text)
    if whole is not None and whole.group(1) in values:
        return values[whole.group(1)]

    def sub(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return str(values[m.group(1)])

    return _FIELD.sub(sub, text)


def render(template: Any, *, job_id: str, n: int, type: str, queue: str, run_id: str) -> Any:
    """The payload of one job: ``template`` with its placeholders filled in (a new object)."""
    values = {"job_id": job_id, "n": n, "type": type, "queue": queue, "run_id": run_id}

    def walk(x: Any) -> Any:
        if isinstance(x, Mapping):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        return _text(x, values) if isinstance(x, str) else x

    return walk(template)
