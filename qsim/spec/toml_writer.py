"""Write a :class:`~qsim.spec.scenario.Scenario` as a TOML file, with comments.

The inverse of :meth:`Scenario.from_toml <qsim.spec.scenario.Scenario.from_toml>`:
``Scenario.from_toml(path)`` of what :func:`to_toml` wrote is the same
scenario. Comments are keyed by the path the validation messages use
(``"duration"``, ``"jobs[0].service"``, ``"engine.fetch_overhead"``) and
written on the lines above that key::

    [[jobs]]
    name = "cut"
    # lognormal by maximum likelihood from 4,812 runs; KS 0.011
    service = { kind = "lognormal", mean = 0.48, cv = 0.93 }

Every string, key and number is rendered by ``tomli_w`` (TOML 1.0's escapes:
control characters such as U+007F or NUL become ``\\u007f``/``\\u0000``);
this module only lays out the tables, inline tables, arrays and comments.
What TOML cannot hold at all — a lone surrogate (U+D800..U+DFFF, which no UTF-8
file can carry) or a value that is not finite — is a
:class:`~qsim.errors.ScenarioError` naming the key, raised before any file is
touched; the text is parsed back before it is written, and :func:`write_toml`
replaces the file in one step (a temporary file beside it, renamed), so a
failed write never leaves a half-written or invalid file behind.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from qsim.errors import ScenarioError
from qsim.spec.scenario import Scenario

__all__ = ["to_toml", "write_toml", "toml_value"]

_ARRAYS = ("queues", "jobs", "pools", "events", "autoscalers")
_SURROGATE = re.compile("[\ud800-\udfff]")
# TOML comments may hold any character but these (control characters other than tab) and surrogates
_NOT_IN_COMMENT = re.compile("[\x00-\x08\x0a-\x1f\x7f\ud800-\udfff]")


def _check_text(text: str, where: str) -> None:
    m = _SURROGATE.search(text)
    if m:
        raise ScenarioError(f"{where} holds the lone surrogate U+{ord(m.group()):04X} ({text!r}), which a TOML "
                            "file cannot hold (TOML is UTF-8 text): rename it")


def _key(name: str, where: str = "a key") -> str:
    """One key, bare when it can be, else a quoted string (rendered by tomli_w)."""
    _check_text(name, where)
    return tomli_w.dumps({name: 0}).removesuffix(" = 0\n")


def _scalar(value: str | bool | int | float) -> str:
    return tomli_w.dumps({"v": value}).removeprefix("v = ").removesuffix("\n")


def toml_value(value: Any, where: str = "a value") -> str:
    """One TOML value: strings, booleans, numbers, lists and inline tables.

    Raises:
        ScenarioError: a string holds a lone surrogate (``where`` names the key).
        ValueError: a number is not finite.  TypeError: any other type.
    """
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str):
        _check_text(value, where)
        return _scalar(value)
    if isinstance(value, (bool, int)):
        return _scalar(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"TOML scenario values must be finite, got {value} ({where})")
        return _scalar(value)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_key(str(k), f'{where}.{k}')} = {toml_value(v, f'{where}.{k}')}"
                                for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v, f"{where}[{i}]") for i, v in enumerate(value)) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML: {value!r}")


def _comment(lines: list[str], text: str | None) -> None:
    """Comment lines; characters a TOML comment cannot hold are shown as ``\\uXXXX``."""
    if text:
        for line in text.splitlines():
            line = _NOT_IN_COMMENT.sub(lambda m: f"\\u{ord(m.group()):04x}", line)
            lines.append("# " + line if line else "#")


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
        lines.append(f"{_key(key)} = {toml_value(value, key)}")
    for section in _ARRAYS:
        for i, table in enumerate(doc.get(section, [])):
            if folder is not None:
                table = _relative_paths(table, Path(folder))
            lines.append("")
            _comment(lines, notes.get(f"{section}[{i}]"))
            lines.append(f"[[{section}]]")
            for key, value in table.items():
                where = f"{section}[{i}].{key}"
                _comment(lines, notes.get(where))
                lines.append(f"{_key(key, where)} = {toml_value(value, where)}")
    lines.append("")
    _comment(lines, notes.get("engine"))
    lines.append("[engine]")
    for key, value in doc["engine"].items():
        _comment(lines, notes.get(f"engine.{key}"))
        lines.append(f"{_key(key)} = {toml_value(value, f'engine.{key}')}")
    text = "\n".join(lines) + "\n"
    try:  # a safety net: what this module writes, tomllib must read
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:  # pragma: no cover - a bug in this module, not the user's input
        raise ScenarioError(f"scenario {scenario.name!r} could not be written as valid TOML ({e}); nothing "
                            "was written") from e
    return text


def write_toml(scenario: Scenario, path: str | Path, *, comments: Mapping[str, str] | None = None,
               header: str = "", option: str | None = None) -> Path:
    """Write :func:`to_toml` to ``path`` (paths inside relative to its folder); returns the path.

    The folder must exist (nothing is created on the way); the file is replaced in one
    step, so a failure leaves the old file (or none) in place.

    Raises:
        ScenarioError: the scenario holds what TOML cannot (see the module docstring).
        UsageError: the folder is missing or cannot be written (``option`` names the
            command-line option in the message).
    """
    from qsim.results.outpath import out_file

    path = out_file(path, option)
    text = to_toml(scenario, comments=comments, header=header, folder=path.parent)
    _replace(path, text.encode("utf-8"), option)
    return path


def _replace(path: Path, data: bytes, option: str | None) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``."""
    from qsim.errors import UsageError

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"{option + ' ' if option else ''}{path}: cannot write ({(e.strerror or str(e)).lower()})") \
            from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
