"""Write a :class:`~qsim.scenario.Scenario` as a TOML file, with comments.

The inverse of :meth:`Scenario.from_toml <qsim.scenario.Scenario.from_toml>`:
``Scenario.from_toml(path)`` of what :func:`to_toml` wrote is the same
scenario. Comments are keyed by the path the validation messages use
(``"duration"``, ``"jobs[0].service"``, ``"engine.fetch_overhead"``) and
written on the lines above that key::

    [[jobs]]
    name = "cut"
    # lognormal by maximum likelihood from 4,812 runs; KS 0.011
    service = { kind = "lognormal", mean = 0.48, cv = 0.93 }
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qsim.scenario import Scenario

__all__ = ["to_toml", "write_toml", "toml_value"]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_ARRAYS = ("queues", "jobs", "pools", "events", "autoscalers")


def _key(name: str) -> str:
    return name if _BARE.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def toml_value(value: Any) -> str:
    """One TOML value: strings, booleans, numbers, lists and inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"TOML scenario values must be finite, got {value}")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Path):
        return json.dumps(str(value), ensure_ascii=False)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML: {value!r}")


def _comment(lines: list[str], text: str | None) -> None:
    if text:
        lines.extend("# " + line if line else "#" for line in text.splitlines())


def _relative_paths(table: dict[str, Any], folder: Path) -> dict[str, Any]:
    out = dict(table)
    for key in ("arrival", "service"):
        part = out.get(key)
        if isinstance(part, dict) and "path" in part:
            path = Path(part["path"])
            try:
                rel = os.path.relpath(path.resolve(), folder.resolve())
            except ValueError:  # another drive (Windows)
                rel = str(path)
            out[key] = {**part, "path": rel}
    return out


def to_toml(scenario: Scenario, *, comments: Mapping[str, str] | None = None, header: str = "",
            folder: str | Path | None = None) -> str:
    """The scenario as TOML text.

    Args:
        comments: Comment text per key path (``"jobs[0].service"``), written
            above that key; ``"queues[0]"`` (a whole table) goes above its
            ``[[queues]]`` line.
        header: Comment lines at the top of the file.
        folder: Where the file will live: ``path`` values (trace, empirical)
            are written relative to it, as :meth:`Scenario.from_toml` reads them.
    """
    notes = dict(comments or {})
    doc = scenario.to_dict()
    lines: list[str] = []
    _comment(lines, header)
    if header:
        lines.append("")
    for key, value in doc.items():
        if key in _ARRAYS or key == "engine":
            continue
        _comment(lines, notes.get(key))
        lines.append(f"{_key(key)} = {toml_value(value)}")
    for section in _ARRAYS:
        for i, table in enumerate(doc.get(section, [])):
            if folder is not None:
                table = _relative_paths(table, Path(folder))
            lines.append("")
            _comment(lines, notes.get(f"{section}[{i}]"))
            lines.append(f"[[{section}]]")
            for key, value in table.items():
                _comment(lines, notes.get(f"{section}[{i}].{key}"))
                lines.append(f"{_key(key)} = {toml_value(value)}")
    lines.append("")
    _comment(lines, notes.get("engine"))
    lines.append("[engine]")
    for key, value in doc["engine"].items():
        _comment(lines, notes.get(f"engine.{key}"))
        lines.append(f"{_key(key)} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


def write_toml(scenario: Scenario, path: str | Path, *, comments: Mapping[str, str] | None = None,
               header: str = "") -> Path:
    """Write :func:`to_toml` to ``path`` (paths inside relative to its folder); returns the path."""
    path = Path(path)
    path.write_text(to_toml(scenario, comments=comments, header=header, folder=path.parent), encoding="utf-8")
    return path
